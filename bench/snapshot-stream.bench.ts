// Streaming right after an initial snapshot, in the same process: what the stream-state cache kept of
// the snapshot's streams. A snapshot's states take at most a fiftieth of the cache (a fifth from
// 2026-12-06 to 2026-12-07; the passing segment, src/sink/state-cache.ts); a transaction touching a snapshotted stream the
// cache no longer holds costs a tail read. Measured against transactions that open new streams.
//
//   npm run bench:snapshot-stream        # builds .tmp/bench-build, then runs this with the CLI's Node flags
//   EA_BENCH_BUILD_DIR=<another build> node --max-semi-space-size=64 --min-semi-space-size=64 --heap-growing-percent=100 \
//     --import ./bin/main-thread-heap.js --import tsx bench/snapshot-stream.bench.ts
//
// EA_BENCH_SNAPSHOT_ROWS invoices (default 100,000; a tenth as many customers) are snapshotted by an
// assembler (mode initial) in this process; then, while it runs, EA_BENCH_UPDATES (default 10,000;
// at most a tenth of the invoices) single-row transactions of each kind are committed in a DO block:
// - new: inserts of draft invoices (InvoiceDrafted on a new stream: nothing to learn);
// - snapshotted: an issued invoice voided (InvoiceVoided on its snapshotted stream), distinct
//   invoices spread over the whole table.
// Each is timed from the DO block's start until the slot is acknowledged past its last commit, with
// the sink's tail reads over it. EA_BENCH_BUILD_DIR runs another build (an A/B: run the bench once
// per build, interleaved). Prints one line per phase; record figures by hand.
import os from 'node:os';
import { compareLsn, createAssembler, silentLogger } from './lib/subject.js';
import { createBenchDatabase, PUBLICATION, TABLES, type BenchDatabase } from './lib/invoicing-db.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { CONTRACTS_DIR } from './lib/pipeline-run.js';
import { fillInvoices } from './lib/reconcile-line.js';
import { until } from './lib/snapshot-runs.js';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { createInvoicingMappers } from '../examples/invoicing/index.js';
import type { Assembler } from '../src/pipeline/index.js';

const ROWS = Number(process.env.EA_BENCH_SNAPSHOT_ROWS ?? 100_000);
const UPDATES = Number(process.env.EA_BENCH_UPDATES ?? 10_000);
if (UPDATES > ROWS / 10) throw new Error('EA_BENCH_UPDATES must be at most a tenth of EA_BENCH_SNAPSHOT_ROWS (distinct issued invoices are voided)');
const log = (line: string) => console.error(`[bench:snapshot-stream ${new Date().toISOString().slice(11, 19)}] ${line}`);

/** Runs `sql` (a DO block committing one transaction per row) and times it until the assembler acknowledged its last commit. */
async function phase(name: string, db: BenchDatabase, assembler: Assembler, failure: () => unknown, sql: string): Promise<void> {
  const tailReadsBefore = assembler.status().sink?.tailReads ?? 0;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  await db.query(sql);
  const [end] = await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  const acknowledged = (): boolean => {
    const acked = assembler.status().lag.acknowledgedLsn;
    return acked !== null && compareLsn(acked, end!.lsn) >= 0;
  };
  await until(`${name} acknowledged`, 3_600_000, acknowledged, assembler, failure);
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const tailReads = (assembler.status().sink?.tailReads ?? 0) - tailReadsBefore;
  log(`${name}: ${UPDATES.toLocaleString('en-US')} transactions in ${seconds.toFixed(2)} s, ${Math.round(UPDATES / seconds).toLocaleString('en-US')} tx/s, bench process CPU ${Math.round((cpu.user + cpu.system) / UPDATES)} µs/tx, tail reads ${tailReads.toLocaleString('en-US')}, cached streams ${assembler.status().sink?.cachedStreams ?? '?'}`);
}

log(`load average at start ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}; ${ROWS.toLocaleString('en-US')} invoices, ${UPDATES.toLocaleString('en-US')} transactions per phase, build ${process.env.EA_BENCH_BUILD_DIR ?? '.tmp/bench-build'}`);
const server = await startEmbeddedPostgres();
const kurrent = await startKurrentDBProcess(0);
try {
  const db = await createBenchDatabase(server, 'bench_snapshot_stream');
  await fillInvoices(db, ROWS);
  const assembler = createAssembler(
    {
      name: 'bench-snapshot-stream',
      source: { connection: server.connectionString({ database: db.name }), slot: 'bench_snapshot_stream', publication: PUBLICATION, tables: [...TABLES] },
      destination: { connectionString: kurrent.connectionString },
      mappers: createInvoicingMappers(),
      contracts: { dir: CONTRACTS_DIR },
      snapshot: { mode: 'initial' },
    },
    { logger: silentLogger },
  );
  let failed: unknown = null;
  const running = assembler.run();
  running.catch((error: unknown) => (failed = error ?? new Error('the assembler failed')));
  const failure = (): unknown => failed;
  try {
    const started = performance.now();
    await until('the initial snapshot', 3_600_000, () => assembler.status().snapshot?.finished === true, assembler, failure);
    log(`initial snapshot: ${assembler.status().snapshot!.rows.toLocaleString('en-US')} rows in ${((performance.now() - started) / 1000).toFixed(1)} s; cached streams ${assembler.status().sink?.cachedStreams ?? '?'}`);
    await phase('new', db, assembler, failure, `DO $$ BEGIN FOR i IN 1..${UPDATES} LOOP
      INSERT INTO invoice (id, customer_id, status, currency, total) VALUES ('new_' || i, 'c' || (i % 100 + 1), 'draft', 'EUR', 0); COMMIT; END LOOP; END $$`);
    // Invoice g has status 'issued' when g % 10 = 1 (fillInvoices); 7919 is prime, so k ↦ k·7919 mod (ROWS/10) is one-to-one.
    const issued = Math.floor(ROWS / 10);
    await phase('snapshotted', db, assembler, failure, `DO $$ BEGIN FOR k IN 0..${UPDATES - 1} LOOP
      UPDATE invoice SET status = 'void', void_reason = 'bench' WHERE id = 'inv_' || lpad((1 + 10 * ((k::bigint * 7919) % ${issued}))::text, 7, '0'); COMMIT; END LOOP; END $$`);
  } finally {
    await assembler.stop();
    await running.catch(() => undefined);
  }
} finally {
  await kurrent.stop();
  await server.destroy();
}
