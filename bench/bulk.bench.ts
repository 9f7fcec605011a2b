// Bulk transactions against streaming, on the same machine in the same run:
//
//   npm run bench:bulk                                        # 50,000 and 150,000 orders
//   EA_BENCH_BULK_SIZES=50000,150000,1000000 npm run bench:bulk   # and the 1,000,000-row transaction
//
// For each size N: the orders table (test/support/orders) gets one bulk INSERT of N rows — one
// transaction, N new streams — then one bulk UPDATE of all N — one transaction over N existing
// streams — after a graceful restart, which carries over the states of the streams the last
// process had cached (at most `limits.maxCachedStreams`, 100,000: an N above it meets streams it
// does not know), then another bulk UPDATE after a restart whose carried states were taken away
// (`loadStates` marks them taken): every stream unknown. The baseline is streaming:
// EA_BENCH_BULK_STREAMING (default 20,000) transactions of one order each, inserted, then (after a
// restart, carried states taken away) updated. Every transaction is written into the WAL before
// the assembler starts; a run is timed from the assembler's "assembler started" log line to the slot
// confirming the last commit (every event durable in KurrentDB). The assembler runs as a child
// process from the production build (`.tmp/bench-build`, as `npm run bench` builds it), the
// in-memory KurrentDB in a process of its own; its peak RSS is the child's VmHWM.
//
// Prints a markdown table and writes bench/results/<date>-bulk.md (EA_BENCH_WRITE=0: prints only,
// as for A/B runs that must not replace the day's record).
import { KurrentDBClient } from '@kurrent/kurrentdb-client';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { REPO_ROOT } from '../test/resilience/assembler-process.js';
import { BULK_ASSEMBLER, createBulkRig } from '../test/support/bulk-rig.js';
import { COMMAND, drain, NODE_ARGS } from './lib/bulk-drain.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { gitCommit, writeResult } from './lib/results.js';
import { stateStreamName } from '../src/sink/index.js';
import { loadStates } from '../src/sink/state-carry.js';

const SIZES = (process.env.EA_BENCH_BULK_SIZES ?? '50000,150000').split(',').map(Number).filter((n) => n > 0);
const STREAMING = Number(process.env.EA_BENCH_BULK_STREAMING ?? 20_000);
if (!existsSync(path.join(REPO_ROOT, '.tmp/bench-build/cli/main.js'))) throw new Error('bench: no build in .tmp/bench-build — run "npx tsc -p tsconfig.build.json --outDir .tmp/bench-build" first (npm run bench:bulk does)');

interface Row {
  readonly label: string;
  readonly shape: 'one bulk transaction' | 'streaming';
  readonly streams: 'new' | 'existing, carried over the restart' | 'existing, none cached';
  readonly events: number;
  readonly transactions: number;
  readonly seconds: number;
  readonly peakRssMiB: number;
  readonly tailReads: number | null;
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
/** Takes away the stream states the last stop carried over (as the next start would take them): that start knows none. */
async function forgetCarried(destination: string): Promise<void> {
  const client = KurrentDBClient.connectionString(destination);
  try {
    await loadStates(client, stateStreamName(BULK_ASSEMBLER), BULK_ASSEMBLER);
  } finally {
    await client.dispose();
  }
}

const log = (line: string) => console.error(`[bench:bulk ${new Date().toISOString().slice(11, 19)}] ${line}`);

// Before anything of the bench starts: figures are for a quiet machine (load below 0.5).
const loadAtStart = os.loadavg();
const server = await startEmbeddedPostgres();
const rows: Row[] = [];
try {
  for (const n of SIZES) {
    const kurrent = await startKurrentDBProcess(0);
    const rig = await createBulkRig(server, `bench${n}`, { destination: kurrent.connectionString, command: COMMAND });
    try {
      let lsn = await rig.bulk(`INSERT INTO orders SELECT g, 'customer-' || (g % 977), 'new', (g % 500) + 0.25, 'secret ' || g FROM generate_series(1, ${n}) g`);
      const inserted = await drain(rig, lsn);
      rows.push({ label: `bulk INSERT of ${fmt(n)} rows`, shape: 'one bulk transaction', streams: 'new', events: n, transactions: 1, ...inserted });
      log(`bulk insert ${fmt(n)}: ${inserted.seconds.toFixed(1)} s, ${fmt(n / inserted.seconds)} events/s, peak RSS ${inserted.peakRssMiB} MiB`);
      lsn = await rig.bulk(`UPDATE orders SET status = 'paid'`);
      const carried = await drain(rig, lsn);
      rows.push({ label: `bulk UPDATE of ${fmt(n)} rows`, shape: 'one bulk transaction', streams: 'existing, carried over the restart', events: n, transactions: 1, ...carried });
      log(`bulk update ${fmt(n)}, states carried over: ${carried.seconds.toFixed(1)} s, ${fmt(n / carried.seconds)} events/s, ${carried.tailReads ?? '?'} tail reads, peak RSS ${carried.peakRssMiB} MiB`);
      await forgetCarried(kurrent.connectionString);
      lsn = await rig.bulk(`UPDATE orders SET status = 'shipped'`);
      const updated = await drain(rig, lsn);
      rows.push({ label: `bulk UPDATE of ${fmt(n)} rows`, shape: 'one bulk transaction', streams: 'existing, none cached', events: n, transactions: 1, ...updated });
      log(`bulk update ${fmt(n)}, none cached: ${updated.seconds.toFixed(1)} s, ${fmt(n / updated.seconds)} events/s, peak RSS ${updated.peakRssMiB} MiB`);
    } finally {
      await rig.close();
      await kurrent.stop();
    }
  }
  // The baseline: the same events, one order per transaction.
  const kurrent = await startKurrentDBProcess(0);
  const rig = await createBulkRig(server, 'benchstream', { destination: kurrent.connectionString, command: COMMAND });
  try {
    let lsn = await rig.bulk(`DO $$ BEGIN FOR g IN 1..${STREAMING} LOOP INSERT INTO orders VALUES (g, 'customer-' || (g % 977), 'new', (g % 500) + 0.25, 'secret ' || g); COMMIT; END LOOP; END $$`);
    const inserted = await drain(rig, lsn);
    rows.push({ label: `${fmt(STREAMING)} INSERTs of one row`, shape: 'streaming', streams: 'new', events: STREAMING, transactions: STREAMING, ...inserted });
    log(`streaming inserts: ${inserted.seconds.toFixed(1)} s, ${fmt(STREAMING / inserted.seconds)} events/s`);
    await forgetCarried(kurrent.connectionString);
    lsn = await rig.bulk(`DO $$ BEGIN FOR g IN 1..${STREAMING} LOOP UPDATE orders SET status = 'paid' WHERE id = g; COMMIT; END LOOP; END $$`);
    const updated = await drain(rig, lsn);
    rows.push({ label: `${fmt(STREAMING)} UPDATEs of one row`, shape: 'streaming', streams: 'existing, none cached', events: STREAMING, transactions: STREAMING, ...updated });
    log(`streaming updates: ${updated.seconds.toFixed(1)} s, ${fmt(STREAMING / updated.seconds)} events/s`);
  } finally {
    await rig.close();
    await kurrent.stop();
  }
} finally {
  await server.destroy();
}

const rate = (row: Row) => row.events / row.seconds;
// Carried or not, a bulk update is compared with the streamed updates of streams none cached.
const streamingRate = (streams: Row['streams']) => rate(rows.find((r) => r.shape === 'streaming' && r.streams === (streams === 'new' ? 'new' : 'existing, none cached'))!);
const table = [
  '| run | streams | events | transactions | seconds | events/s | × streaming (same streams) | assembler peak RSS (MiB) | tail reads |',
  '|---|---|---:|---:|---:|---:|---:|---:|---:|',
  ...rows.map(
    (r) =>
      `| ${r.label} | ${r.streams} | ${fmt(r.events)} | ${fmt(r.transactions)} | ${r.seconds.toFixed(1)} | ${fmt(rate(r))} | ${r.shape === 'streaming' ? '1.00' : (rate(r) / streamingRate(r.streams)).toFixed(2)} | ${r.peakRssMiB} | ${r.tailReads === null ? '—' : fmt(r.tailReads)} |`,
  ),
].join('\n');
const cpus = os.cpus();
const now = new Date();
const report = `# Bulk transactions against streaming

Command (from the repository root):

\`\`\`bash
${SIZES.join(',') === '50000,150000' ? 'npm run bench:bulk' : `EA_BENCH_BULK_SIZES=${SIZES.join(',')} npm run bench:bulk`}
\`\`\`

Machine: ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown'}; Node ${process.version}, the assembler with \`${NODE_ARGS.join(' ')}\`; load average at the start ${loadAtStart.map((l) => l.toFixed(2)).join(' / ')}, at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}.
Run at ${now.toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${gitCommit()}.

Each run: the transactions are in the WAL before the assembler starts (production build, child process); timed from its "assembler started" line to the slot confirming the last commit. The in-memory KurrentDB runs in a process of its own. "Existing, carried over the restart": the assembler was stopped gracefully after the streams were written and restarted; it carried over the states of the streams it had cached (at most 100,000). "Existing, none cached": restarted with those states taken away, so it knows none of the streams.

${table}
`;
console.log(report);
if (process.env.EA_BENCH_WRITE !== '0') log(`written ${writeResult('bulk', report, now)}`);
