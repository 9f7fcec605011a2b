// Two builds of the assembler, A and B, run in pairs seconds apart — for changes of a few per cent,
// which the machine's moods (the same code at 40 or 80 µs of CPU per transaction from one minute
// to the next, bench/results/2026-12-07-copy-data.md) hide from runs a minute apart:
//
//   EA_BENCH_PAIR=base=.tmp/bench-base,new=.tmp/bench-build npm run bench:pair                  # streaming
//   EA_BENCH_PAIR=base=.tmp/bench-base,new=.tmp/bench-build EA_BENCH_PAIR_KIND=snapshot npm run bench:pair
//
// EA_BENCH_ROUNDS times (default 8), each build runs once — A then B, B then A in even rounds — in a
// process of its own (bench/lib/pair-child.ts, with the CLI's heap flags), the two runs of a pair
// seconds apart; one PostgreSQL for all. Kind `stream` (default): EA_BENCH_TRANSACTIONS (default
// 50,000) invoice transactions pre-written once, each run draining them from a slot of its own into
// a fresh in-memory KurrentDB process at 2 ms per append. Kind `snapshot`: each run an initial
// snapshot of EA_BENCH_SNAPSHOT_ROWS invoices (default 200,000, and a tenth as many customers) in a
// database of its own into a fresh server at 1 ms per append (bench/lib/snapshot-runs.ts). Printed
// per run: seconds, CPU µs per transaction (row) of the run's process and of the server process, and
// the run's GCs; per pair B ÷ A of the run's CPU per unit, as measured and divided by the
// server's (whose code and work are the same in both runs of a pair, so its CPU per unit gauges the
// machine's speed at that moment — unless the change alters what the server is sent, e.g. the
// snapshot's chunk size: then compare the CPU of both processes together, also printed); then the
// medians with their spread. Prints only; record figures by hand.
import { spawn } from 'node:child_process';
import os from 'node:os';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { describeGc } from './lib/gc-watch.js';
import { createBenchDatabase, PUBLICATION, writeInvoicesBulk } from './lib/invoicing-db.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import type { PairJob, PairResult } from './lib/pair-child.js';
import { pairBuilds } from './lib/pair-builds.js';
import { drainRaw } from './lib/raw-reader.js';

const KIND = process.env.EA_BENCH_PAIR_KIND ?? 'stream';
const ROUNDS = Math.max(2, Number(process.env.EA_BENCH_ROUNDS ?? 8));
const N = Number(process.env.EA_BENCH_TRANSACTIONS ?? 50_000);
const ROWS = Number(process.env.EA_BENCH_SNAPSHOT_ROWS ?? 200_000);
if (KIND !== 'stream' && KIND !== 'snapshot') throw new Error(`EA_BENCH_PAIR_KIND: "${KIND}" — stream or snapshot`);
const builds = pairBuilds();
/** The CLI's flags (see Deployment in the README), as `npm run bench:snapshot` runs the assembler. */
const CHILD_FLAGS = ['--max-semi-space-size=64', '--min-semi-space-size=64', '--heap-growing-percent=100', '--import', './bin/main-thread-heap.js', '--import', 'tsx'];

const log = (line: string) => console.error(`[bench:pair ${new Date().toISOString().slice(11, 19)}] ${line}`);

interface Run extends PairResult {
  readonly label: string;
}

/** One run of `dir`'s build in a child process. */
function runChild(dir: string, job: PairJob): Promise<PairResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CHILD_FLAGS, 'bench/lib/pair-child.ts'], {
      env: { ...process.env, EA_BENCH_BUILD_DIR: dir, EA_BENCH_PAIR_JOB: JSON.stringify(job) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => {
      const line = out.trim().split('\n').pop();
      if (code !== 0 || !line) reject(new Error(`bench: the run of ${dir} exited with code ${code}`));
      else resolve(JSON.parse(line) as PairResult);
    });
  });
}

log(`load average at start ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}; kind ${KIND}, ${ROUNDS} rounds, A = ${builds[0]!.label} (${builds[0]!.dir}), B = ${builds[1]!.label} (${builds[1]!.dir})`);
const server = await startEmbeddedPostgres();
const runs: Run[][] = [];
try {
  const info = { host: server.host, port: server.port, superuser: server.superuser, password: server.password };
  let jobOf: (build: number, round: number) => Omit<PairJob, 'kurrent'>;
  if (KIND === 'stream') {
    const db = await createBenchDatabase(server, 'pair');
    const slots = Array.from({ length: ROUNDS * 2 }, (_, i) => `pair_${i}`);
    await db.createSlots(['pair_raw', ...slots]);
    await writeInvoicesBulk(db, N);
    // The raw reader learns where the WAL of the N transactions ends.
    const raw = await drainRaw(db.connection, 'pair_raw', PUBLICATION, N, N);
    log(`raw pgoutput reader: ${raw.seconds.toFixed(2)} s, ${Math.round(N / raw.seconds)} tx/s`);
    jobOf = (build, round) => ({
      kind: 'stream',
      server: info,
      stream: { database: db.name, publication: PUBLICATION, slot: slots[round * 2 + build]!, markLsn: raw.markLsn, lastEndLsn: raw.lastEndLsn, transactions: N },
    });
  } else {
    jobOf = (build, round) => ({ kind: 'snapshot', server: info, snapshot: { rows: ROWS, suffix: `_pair_${round}_${build}` } });
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    const pair: Run[] = [];
    for (const build of order) {
      const kurrent = await startKurrentDBProcess(KIND === 'stream' ? 2 : 1);
      try {
        const r = await runChild(builds[build]!.dir, { ...jobOf(build, round), kurrent: { connectionString: kurrent.connectionString, pid: kurrent.pid } });
        const run: Run = { label: builds[build]!.label, ...r };
        pair[build] = run;
        log(`round ${round + 1} ${run.label}: ${run.seconds.toFixed(2)} s, ${Math.round(run.units / run.seconds)} /s; CPU µs per unit: bench ${perUnit(run.bench, run)}, server ${perUnit(run.server, run)}; ${describeGc(run.gc)}`);
      } finally {
        await kurrent.stop();
      }
    }
    runs.push(pair);
    const [a, b] = pair as [Run, Run];
    log(`round ${round + 1}: B ÷ A CPU per unit ${(b.bench / b.units / (a.bench / a.units)).toFixed(3)}, against the server's ${(b.bench / b.server / (a.bench / a.server)).toFixed(3)}, with the server's ${((b.bench + b.server) / b.units / ((a.bench + a.server) / a.units)).toFixed(3)}; seconds ${(b.seconds / a.seconds).toFixed(3)}`);
  }
} finally {
  await server.destroy();
}

function perUnit(seconds: number, run: { units: number }): string {
  return ((seconds * 1e6) / run.units).toFixed(1);
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const counted = runs as [Run, Run][];
const spread = (values: number[], digits = 3) => `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
const cpuRatio = counted.map(([a, b]) => b.bench / b.units / (a.bench / a.units));
const gaugedRatio = counted.map(([a, b]) => b.bench / b.server / (a.bench / a.server));
const secondsRatio = counted.map(([a, b]) => b.seconds / a.seconds);
const totalRatio = counted.map(([a, b]) => (b.bench + b.server) / b.units / ((a.bench + a.server) / a.units));
for (const [i, build] of builds.entries()) {
  const mine = counted.map((pair) => pair[i]!);
  log(`${build.label}: CPU µs per unit, bench ${spread(mine.map((r) => (r.bench * 1e6) / r.units), 1)}, server ${spread(mine.map((r) => (r.server * 1e6) / r.units), 1)}; per second ${spread(mine.map((r) => r.units / r.seconds), 0)}`);
}
log(`B ÷ A over ${counted.length} pairs, median (min–max): CPU per unit ${spread(cpuRatio)}; against the server's ${spread(gaugedRatio)}; with the server's (both processes' CPU per unit) ${spread(totalRatio)}; seconds ${spread(secondsRatio)}; B lower in ${cpuRatio.filter((r) => r < 1).length} of ${counted.length} pairs (CPU), ${gaugedRatio.filter((r) => r < 1).length} (against the server)`);
