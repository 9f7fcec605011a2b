// Snapshots end to end on their own — the snapshot part of `npm run bench` (bench/lib/snapshot-runs.ts)
// without the streaming rounds, with the peak RSS of the process the assembler runs in:
//
//   npm run bench:snapshot                                             # initial snapshot of 150,000 invoices
//   EA_BENCH_SNAPSHOT_ROWS=1000000 npm run bench:snapshot              # the 1,000,000-row memory check
//   EA_BENCH_SNAPSHOT_KINDS=initial,incremental EA_BENCH_ROUNDS=3 npm run bench:snapshot
//   EA_BENCH_SNAPSHOT_KINDS=process EA_BENCH_SNAPSHOT_ROWS=1000000 npm run bench:snapshot   # the assembler as a child process
//
// Each run: a fresh database filled with EA_BENCH_SNAPSHOT_ROWS invoices (and a tenth as many
// customers), a fresh in-memory KurrentDB process at EA_BENCH_SNAPSHOT_APPEND_MS (default 1) per
// append, the assembler (production build, in this process; EA_BENCH_BUILD_DIR picks another
// build, for an A/B comparison) timed as in `npm run bench`. Printed per run: rows/s, CPU µs per
// row of this process and of the server process, and this process's peak RSS over the run
// (VmHWM, reset before each run through /proc/self/clear_refs), and its garbage collections (bench/lib/gc-watch.ts:
// a run with several times the usual mark-compacts ran in a slow GC mode). Kind `process`: the initial
// snapshot with the assembler as a child process (the CLI from the build, bench/lib/snapshot-process.ts):
// its own peak RSS and CPU, start-up included; EA_BENCH_SNAPSHOT_SHAPE=ts or mjs runs it as a deployment
// does, with a TypeScript or a JavaScript configuration (bench/lib/snapshot-process.ts). EA_BENCH_SNAPSHOT_OPTIONS (JSON) adds options to
// the assembler's `snapshot` section (every kind), e.g. '{"chunkSize":4096}' or '{"parallelism":2}'.
// Prints only; record figures by hand.
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { incrementalSnapshotRun, initialSnapshotRun, type SnapshotRun } from './lib/snapshot-runs.js';
import { initialSnapshotProcessRun } from './lib/snapshot-process.js';
import { describeGc, watchGc } from './lib/gc-watch.js';

const ROWS = Number(process.env.EA_BENCH_SNAPSHOT_ROWS ?? 150_000);
const ROUNDS = Math.max(1, Number(process.env.EA_BENCH_ROUNDS ?? 1));
const KINDS = (process.env.EA_BENCH_SNAPSHOT_KINDS ?? 'initial').split(',').filter((k): k is 'initial' | 'incremental' | 'process' => k === 'initial' || k === 'incremental' || k === 'process');
const APPEND_MS = Number(process.env.EA_BENCH_SNAPSHOT_APPEND_MS ?? 1);
const WRITER = { rate: Number(process.env.EA_BENCH_SNAPSHOT_WRITER_RATE ?? 200), seconds: Number(process.env.EA_BENCH_SNAPSHOT_WRITER_SECONDS ?? 15) };

const log = (line: string) => console.error(`[bench:snapshot ${new Date().toISOString().slice(11, 19)}] ${line}`);
const mib = (kib: number) => (kib / 1024).toFixed(0);

function status(field: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : Number.NaN;
}

function resetPeak(): void {
  try {
    writeFileSync('/proc/self/clear_refs', '5'); // resets VmHWM to the current RSS
  } catch {
    log('could not reset the peak RSS (VmHWM): figures are the peak since start');
  }
}

log(`load average at start ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}; ${ROWS.toLocaleString('en-US')} invoices, ${KINDS.join(' + ')}, ${ROUNDS} round(s), build ${process.env.EA_BENCH_BUILD_DIR ?? '.tmp/bench-build'}${KINDS.includes('process') ? `, process shape ${process.env.EA_BENCH_SNAPSHOT_SHAPE ?? 'dev'}` : ''}`);
const server = await startEmbeddedPostgres();
const lines: string[] = [];
try {
  let n = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    for (const kind of KINDS) {
      const kurrent = await startKurrentDBProcess(APPEND_MS);
      try {
        if (kind === 'process') {
          n += 1;
          const run = await initialSnapshotProcessRun(server, kurrent, ROWS, `_${n}`);
          const perRow = (s: number | null) => (s === null ? '—' : ((s * 1e6) / run.rows).toFixed(1));
          const line = `process round ${round}: ${run.rows} rows, ${run.events} events, ${run.seconds.toFixed(2)} s (start-up included), ${Math.round(run.rows / run.seconds)} rows/s; CPU µs/row: assembler ${perRow(run.cpu.assembler)} (main thread ${perRow(run.cpu.mainThread)}), server ${perRow(run.cpu.server)}; assembler peak RSS ${run.peakRssMiB} MiB`;
          lines.push(line);
          log(line);
          continue;
        }
        globalThis.gc?.();
        resetPeak();
        const before = status('VmRSS');
        // What the heap holds over the run (the RSS alone does not tell the young generation's reserve from live data).
        const heap = { used: 0, external: 0 };
        const sampler = setInterval(() => {
          const m = process.memoryUsage();
          heap.used = Math.max(heap.used, m.heapUsed);
          heap.external = Math.max(heap.external, m.external);
        }, 100);
        n += 1;
        const gcWatch = watchGc();
        const run: SnapshotRun =
          kind === 'initial'
            ? await initialSnapshotRun(server, kurrent, ROWS, log, `_${n}`)
            : await incrementalSnapshotRun(server, kurrent, ROWS, WRITER, log, `_${n}`);
        clearInterval(sampler);
        const gc = gcWatch.stop();
        const peak = status('VmHWM');
        const perRow = (s: number | null) => (s === null ? '—' : ((s * 1e6) / run.rows).toFixed(1));
        const line = `${kind} round ${round}: ${run.rows} rows, ${run.events} events, ${run.seconds.toFixed(2)} s, ${Math.round(run.rows / run.seconds)} rows/s; CPU µs/row: bench ${perRow(run.cpu.bench)}, server ${perRow(run.cpu.server)}, walsender ${perRow(run.cpu.walsender)}; RSS MiB: before ${mib(before)}, peak ${mib(peak)}; peak heap used ${mib(heap.used / 1024)}, external ${mib(heap.external / 1024)}; GC: ${describeGc(gc)}`;
        lines.push(line);
        log(line);
      } finally {
        await kurrent.stop();
      }
    }
  }
} finally {
  await server.destroy();
}
console.log(lines.join('\n'));
