// A leader that loses its connection and finds the slot streamed by another connection was
// replaced: its in-flight work is stale (stream revisions, checkpoint), so it gives it up, stands
// by — past lifecycle.startupTimeoutMs, which does not apply to waiting for the slot — and takes
// the slot again when it frees, re-reading the durable state. Every event still lands exactly once.
// In-process (`createAssembler`), with a plain source of the test's own holding the slot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { createPostgresSource, type PostgresSource } from '../../src/source/index.js';
import { createReferenceSlot, dropReferenceSlot, formatDestinationReport, verifyDestination } from '../../src/testing/verify-destination.js';
import { createPipelineRig, TABLES, workload, type PipelineRig } from './pipeline-rig.js';

// Long enough for each attempt to open the destination under CI load: the deadline aborts the
// opening itself, and at 300 ms a CI run at load saw the very first start fail (state 'failed').
// Standing by is then checked well past it (1.5 ×, counted from when the slot was lost, which is
// after the attempt's deadline started).
const STARTUP_TIMEOUT_MS = 3_000;

describe('hot standby: a leader whose slot was taken while it reconnected', () => {
  let rig: PipelineRig;
  let assembler: Assembler | null = null;
  let holder: PostgresSource | null = null;
  const reference = `lost_ref_${process.pid}`;

  beforeAll(async () => {
    rig = await createPipelineRig('lostslot');
    await createReferenceSlot(rig.db.connectionString, reference);
  });

  afterAll(async () => {
    await holder?.close();
    await assembler?.stop();
    await dropReferenceSlot(rig.db.connectionString, reference).catch(() => undefined);
    await rig?.close();
  });

  it('gives up its in-flight work, stands by past the start-up deadline, takes the slot back, and lands every event once', async () => {
    const slot = rig.slots[0]!;
    const log = rig.logger();
    const messages = () => log.lines.map((l) => l.message);
    assembler = createAssembler(rig.config({ standby: { pollIntervalMs: 50 }, lifecycle: { startupTimeoutMs: STARTUP_TIMEOUT_MS, drainTimeoutMs: 5_000 } }), { logger: log });
    const running = assembler.run();
    running.catch(() => undefined); // awaited below
    const a = assembler;
    expect(a.status().role).toBe('starting');
    await rig.until(() => expect(a.status(), JSON.stringify({ lastError: a.status().lastError, log: log.lines.slice(-8) })).toMatchObject({ role: 'leader', state: 'running', slotHolder: null }));

    const w = workload(rig);
    for (let i = 1; i <= 5; i++) await w.customer(`before_${i}`);
    await rig.until(() => expect(rig.events('customer-before_5')).toHaveLength(1));

    // The leader's connection is cut; another connection takes the slot before it reconnects.
    const [{ ok }] = (await rig.sql('SELECT pg_terminate_backend(active_pid) AS ok FROM pg_replication_slots WHERE slot_name = $1', [slot])) as [{ ok: boolean }];
    expect(ok).toBe(true);
    // The other process only holds the slot: it must not move it past what the leader recorded as
    // durable — a source acknowledges keepalive positions while it is idle, and had it done so past
    // the transactions written below (seen once in CI: confirmed_flush_lsn moved by 0xEF0), the
    // leader would rightly refuse with REBUILD_NEEDED. Its idle acknowledgements stop at the slot's
    // position when it takes over.
    const [{ confirmed }] = (await rig.sql('SELECT confirmed_flush_lsn::text AS confirmed FROM pg_replication_slots WHERE slot_name = $1', [slot])) as [{ confirmed: string }];
    holder = createPostgresSource({ connection: rig.captureUrl, slot, publication: rig.publication, tables: TABLES, checks: false, slotPollIntervalMs: 10, idleAcknowledgeLimit: () => confirmed });
    await holder.start();
    await holder.streaming();
    const [{ active_pid: holderPid }] = (await rig.sql('SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1', [slot])) as [{ active_pid: number }];
    for (let i = 1; i <= 5; i++) await w.customer(`during_${i}`); // reach the assembler only once it holds the slot again

    await rig.until(() => expect(a.status()).toMatchObject({ role: 'standby', slotHolder: { pid: holderPid } }), 20_000);
    const lost = log.lines.find((l) => l.message.startsWith('lost the slot to another process'));
    expect(lost).toMatchObject({ level: 'warn', fields: { slot, holder: { pid: holderPid } } });
    expect(messages().filter((m) => m.startsWith('source: connection lost'))).toHaveLength(1); // the cut, not one per poll
    const lostAt = Date.now();
    // Standing by is no unavailability: still a standby (polling every 50 ms) well past startupTimeoutMs.
    await rig.until(() => expect(Date.now() - lostAt).toBeGreaterThan(1.5 * STARTUP_TIMEOUT_MS), 10_000);
    expect(a.status()).toMatchObject({ role: 'standby', state: 'starting', lastError: null });
    const standingBy = messages().filter((m) => m.endsWith(': standing by'));
    expect(standingBy, 'one line on entering standby, none per poll').toHaveLength(1);
    expect(standingBy[0]).toMatch(new RegExp(`^slot "${slot}" is active for pid ${holderPid} on [^ ]+:\\d+: standing by$`));
    expect(rig.events('customer-during_1')).toHaveLength(0);

    await holder.close();
    holder = null;
    // On failure the message carries the attempt's error and the last log lines (seen once, at load 10, as state 'failed').
    await rig.until(() => expect(a.status(), JSON.stringify({ lastError: a.status().lastError, log: log.lines.slice(-8) })).toMatchObject({ role: 'leader', state: 'running' }), 20_000);
    expect(messages().filter((m) => m.startsWith('took over the slot after'))).toHaveLength(1);
    for (let i = 1; i <= 5; i++) await w.customer(`after_${i}`);
    await rig.until(() => expect(rig.events('customer-after_5')).toHaveLength(1));
    await a.stop();
    await running;
    expect(messages().filter((m) => m === 'assembler started')).toHaveLength(2);

    const report = await verifyDestination({
      source: { connection: rig.db.connectionString, slot: reference, publication: rig.publication, tables: TABLES.map((table) => ({ table, needsOldValues: table === 'public.invoice' })) },
      destination: { connectionString: rig.kdb.connectionString },
      mappers,
      assembler: rig.name,
    });
    expect(report.ok, formatDestinationReport(report, { maxListed: 10 })).toBe(true);
    expect(report.expectedEvents).toBe(15);
  });
});
