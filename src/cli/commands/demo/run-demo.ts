// `event-assembler demo` (`npm start`): the whole line on one machine — PostgreSQL 17 and an
// in-memory KurrentDB started here (or yours, given by flags), the invoicing example's tables in
// the demo's own schema, capture set up under a least-privilege role, the assembler running the
// invoicing mappers and contracts, a live business workload, then a graceful stop and a check
// that the destination holds exactly what the source history says it must, then the example's
// projections run to the end of the streams and their balances are checked. This file is the
// sequence; each step lives in the file named after it.
import { createReferenceSlotWithSnapshot, dropReferenceSlot } from '../../../testing/verify-destination.js';
import { startAssembler } from './assembler.js';
import { checkDestination } from './check.js';
import { createCleanups } from './cleanups.js';
import { loadExample } from './example.js';
import { runLiveWorkload } from './live-workload.js';
import { demoNames } from './names.js';
import { createProgress } from './progress.js';
import { projectionSchema, runProjections } from './projections.js';
import { startServers } from './servers.js';
import { reconcileDemo } from './reconcile-check.js';
import { prepareSource } from './source-setup.js';
import { formatSummary, latencyOf, plural } from './summary.js';
import type { DemoIo, DemoOptions, DemoResult } from './types.js';
import { throwIfInterrupted } from './wait.js';

/** Runs the demo; the caller decides the exit code from `ok`. Throws on a setup failure or a fatal assembler error. */
export async function runDemo(options: DemoOptions, io: DemoIo): Promise<DemoResult> {
  const cleanups = createCleanups();
  const progress = createProgress(io);
  const say = progress.say;
  const names = demoNames(options);
  try {
    const example = await loadExample();
    const mappers = example.createInvoicingMappers(names.schema);
    const { admin, kurrentdb } = await startServers(options, cleanups, say, io.signal);
    const { tables, capture } = await prepareSource(admin, names, mappers, cleanups, say);
    throwIfInterrupted(io.signal);

    // Existing rows: written before the assembler starts, so its initial snapshot reads them.
    const workload = example.createInvoicingWorkload({
      connection: admin,
      schema: names.schema,
      seed: options.seed,
      rate: options.rate,
      concurrency: options.concurrency,
      ...(names.idPrefix ? { idPrefix: names.idPrefix } : {}),
    });
    cleanups.push('workload connections', () => workload.close());
    const seeded = await workload.seed(options.customers);
    say(`seeded ${seeded.seeded.customers} customers, ${seeded.seeded.invoices} invoices (${seeded.seeded.lines} lines, ${seeded.seeded.payments} payments) in ${plural(seeded.transactions, 'transaction')}, before the assembler starts`);
    throwIfInterrupted(io.signal);
    // The reference for the check: a slot with its own exported snapshot, created now. Nothing
    // commits between it and the assembler's slot (the workload starts only once that slot
    // exists), so both snapshots hold the same rows and both streams start after them.
    const reference = await createReferenceSlotWithSnapshot(admin, names.referenceSlot, { mappers, assembler: names.assembler, generation: '1', tables });
    cleanups.push(`reference slot ${names.referenceSlot}`, () => dropReferenceSlot(admin, names.referenceSlot));
    say(`reference slot ${names.referenceSlot} for the check: exported snapshot read (${reference.rows} rows → ${reference.expectedBefore.length} snapshot events expected), streaming from ${reference.lsn}`);
    throwIfInterrupted(io.signal);

    const line = await startAssembler({ names, capture, kurrentdb, mappers, verbose: options.verbose }, progress, cleanups, io.signal);
    const live = await runLiveWorkload(options, admin, workload, line, progress, io);
    await workload.close();
    // While the assembler runs: it must pass the cut for the comparison to start.
    const reconciliation = await reconcileDemo({ names, capture, kurrentdb, reconcilers: example.createInvoicingReconcilers(names.schema) });
    say(reconciliation.report ? `reconcile: ${reconciliation.report.ok ? 'agreement' : 'DIFFERENCES'} at cut ${reconciliation.report.cut.lsn} in ${(reconciliation.report.durationMs / 1000).toFixed(1)} s` : `reconcile: FAILED (${reconciliation.error})`);
    const stopStarted = performance.now();
    await line.assembler.stop();
    const summary = await line.running;
    say(`stopped gracefully in ${Math.round(performance.now() - stopStarted)} ms (drained, acknowledged ${summary.acknowledgedLsn ?? 'nothing'})`);

    const check = await checkDestination({ names, admin, capture, kurrentdb, mappers, expectedBefore: reference.expectedBefore });
    const projections = await runProjections({ names, admin, kurrentdb, example, verbose: options.verbose }, cleanups, say, io.signal);
    const result: DemoResult = {
      ok: check.report.ok && check.sensitive.found === 0 && projections.ok && reconciliation.report?.ok === true,
      report: check.report,
      summary,
      workload: workload.counts(),
      live,
      latency: latencyOf(line.assembler.status().lag.commitToAppendPercentiles),
      sensitive: check.sensitive,
      projections,
      reconciliation,
    };
    io.write(formatSummary(result));

    if (options.keep) {
      say('\n--keep: servers left running until Ctrl-C');
      say(`  PostgreSQL (admin):   ${admin}`);
      say(`  PostgreSQL (capture): ${capture}`);
      say(`  tables in schema:     ${names.schema}`);
      say(`  projections in:       ${projectionSchema(names)}`);
      say(`  KurrentDB:            ${kurrentdb}`);
      await new Promise<void>((resolve) => (io.signal.aborted ? resolve() : io.signal.addEventListener('abort', () => resolve(), { once: true })));
    }
    return result;
  } finally {
    await cleanups.runAll((text) => io.write(text));
  }
}
