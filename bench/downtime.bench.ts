// Restart after downtime with a large working set (issue 18):
//
//   npm run bench:downtime                                   # 200,000 streams, 20,000 updates, 3 rounds
//   EA_BENCH_DOWNTIME_STREAMS=20000 EA_BENCH_DOWNTIME_UPDATES=5000 EA_BENCH_DOWNTIME_ROUNDS=1 npm run bench:downtime
//   EA_BENCH_DOWNTIME_BUILDS=before=.tmp/bench-build-base,after=.tmp/bench-build npm run bench:downtime
//   EA_BENCH_DOWNTIME_LOG=.tmp/downtime.log …                  # keeps the assemblers' log
//   EA_BENCH_TLS=1 …                                          # the server serves TLS (bench/lib/kurrentdb-server.ts)
//
// The orders table (test/support/orders) gets EA_BENCH_DOWNTIME_STREAMS orders in one bulk INSERT,
// drained by the assembler (every order a stream in the in-memory KurrentDB, its own process).
// Then, per round and per build (EA_BENCH_DOWNTIME_BUILDS: `label=dir` of production builds, run
// in alternating order each round — one code path, two builds, compared in the same run):
//  - streaming: EA_BENCH_DOWNTIME_UPDATES single-order INSERTs (new streams: nothing to learn),
//    committed while the assembler is stopped, drained by a fresh one — the streaming rate;
//  - downtime: as many single-order UPDATEs of distinct existing orders spread over the working
//    set, committed while it is stopped, drained by a fresh one (it knows none of the streams).
// Each drain is timed from the assembler's "assembler started" line to the slot confirming the
// last commit; CPU µs per transaction of the assembler, the walsender and the server are
// /proc/<pid>/stat over the drain. Reported: each run, and per build the median of the rounds'
// downtime / streaming ratios with their spread. The load average is read before anything starts.
// Prints a markdown report (EA_BENCH_WRITE=1 also writes bench/results/<date>-downtime.md).
import { copyFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { REPO_ROOT } from '../test/resilience/assembler-process.js';
import { createBulkRig } from '../test/support/bulk-rig.js';
import { COMMAND, drain, NODE_ARGS, type DrainResult } from './lib/bulk-drain.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { gitCommit, writeResult } from './lib/results.js';

const STREAMS = Number(process.env.EA_BENCH_DOWNTIME_STREAMS ?? 200_000);
const UPDATES = Number(process.env.EA_BENCH_DOWNTIME_UPDATES ?? 20_000);
const ROUNDS = Number(process.env.EA_BENCH_DOWNTIME_ROUNDS ?? 3);
const BUILDS = (process.env.EA_BENCH_DOWNTIME_BUILDS ?? 'current=.tmp/bench-build').split(',').map((spec) => {
  const [label, dir] = spec.includes('=') ? spec.split('=') : [spec, spec];
  return { label: label!, dir: dir! };
});
for (const build of BUILDS) {
  if (!existsSync(path.join(REPO_ROOT, build.dir, 'cli/main.js'))) throw new Error(`bench: no build in ${build.dir} — run "npx tsc -p tsconfig.build.json --outDir ${build.dir}" first (npm run bench:downtime builds .tmp/bench-build)`);
}
/** The assembler's `limits` overrides, e.g. '{"maxInFlightTransactions":4000}' (defaults otherwise). */
const LIMITS = process.env.EA_BENCH_DOWNTIME_LIMITS ? (JSON.parse(process.env.EA_BENCH_DOWNTIME_LIMITS) as Record<string, number>) : undefined;
if (UPDATES > STREAMS) throw new Error('EA_BENCH_DOWNTIME_UPDATES must not exceed EA_BENCH_DOWNTIME_STREAMS (distinct orders are updated)');

/** Statuses the orders contract allows, one per run. */
const STATUSES = ['paid', 'shipped', 'cancelled', 'archived'];

interface Run {
  readonly round: number;
  readonly build: string;
  readonly kind: 'streaming' | 'downtime';
  readonly result: DrainResult;
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const log = (line: string) => console.error(`[bench:downtime ${new Date().toISOString().slice(11, 19)}] ${line}`);
const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const perTx = (seconds: number | null) => (seconds === null || Number.isNaN(seconds) ? '—' : fmt((seconds * 1e6) / UPDATES));

const loadAtStart = os.loadavg();
log(`load average at start ${loadAtStart.map((l) => l.toFixed(2)).join(' / ')}; ${fmt(STREAMS)} streams, ${fmt(UPDATES)} transactions per run, ${ROUNDS} round(s), builds ${BUILDS.map((b) => `${b.label}=${b.dir}`).join(', ')}`);
const server = await startEmbeddedPostgres();
const kurrent = await startKurrentDBProcess(0);
const runs: Run[] = [];
try {
  const rig = await createBulkRig(server, 'downtime', { destination: kurrent.connectionString, command: COMMAND });
  try {
    process.env.EA_BENCH_BUILD_DIR = BUILDS[0]!.dir;
    let lsn = await rig.bulk(`INSERT INTO orders SELECT g, 'customer-' || (g % 977), 'new', (g % 500) + 0.25, 'secret ' || g FROM generate_series(1, ${STREAMS}) g`);
    const setup = await drain(rig, lsn, kurrent.pid, LIMITS); // the same assembler settings as every run
    log(`working set: ${fmt(STREAMS)} streams written in ${setup.seconds.toFixed(1)} s`);
    let nextId = STREAMS + 1;
    let offset = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? BUILDS : [...BUILDS].reverse();
      for (const build of order) {
        // The child inherits this process's environment (bulk-rig → startAssemblerProcess): the build to run.
        process.env.EA_BENCH_BUILD_DIR = build.dir;
        const first = nextId;
        nextId += UPDATES;
        lsn = await rig.bulk(`DO $$ BEGIN FOR g IN ${first}..${nextId - 1} LOOP INSERT INTO orders VALUES (g, 'customer-' || (g % 977), 'new', 1.25, 'note ' || g); COMMIT; END LOOP; END $$`);
        const streaming = await drain(rig, lsn, kurrent.pid, LIMITS);
        runs.push({ round, build: build.label, kind: 'streaming', result: streaming });
        log(`round ${round} ${build.label} streaming: ${streaming.seconds.toFixed(2)} s, ${fmt(UPDATES / streaming.seconds)} tx/s, tail reads ${streaming.tailReads ?? '?'}`);
        // Distinct orders spread over the working set (7919 is prime; a working set that is a multiple of it still gets distinct ones by the offset walk).
        const status = STATUSES[offset % STATUSES.length];
        lsn = await rig.bulk(
          `DO $$ BEGIN FOR g IN 0..${UPDATES - 1} LOOP UPDATE orders SET status = '${status}' WHERE id = 1 + ((${offset} + g::bigint * 7919) % ${STREAMS}); COMMIT; END LOOP; END $$`,
        );
        offset += 1;
        const downtime = await drain(rig, lsn, kurrent.pid, LIMITS);
        runs.push({ round, build: build.label, kind: 'downtime', result: downtime });
        log(`round ${round} ${build.label} downtime: ${downtime.seconds.toFixed(2)} s, ${fmt(UPDATES / downtime.seconds)} tx/s, tail reads ${downtime.tailReads ?? '?'}, read ahead ${downtime.prefetchHits ?? '—'}, framed ${downtime.framedTailReads ?? '—'}`);
      }
    }
  } finally {
    // EA_BENCH_DOWNTIME_LOG=<file>: keep the assemblers' log (it goes with the rig's directory otherwise).
    if (process.env.EA_BENCH_DOWNTIME_LOG && existsSync(rig.logFile)) copyFileSync(rig.logFile, process.env.EA_BENCH_DOWNTIME_LOG);
    await rig.close();
  }
} finally {
  await kurrent.stop();
  await server.destroy();
}

const table = [
  '| round | build | run | seconds | transactions/s | assembler CPU µs/tx | of it main thread | walsender µs/tx | server µs/tx | tail reads | of them read ahead | peak RSS (MiB) |',
  '|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ...runs.map(
    ({ round, build, kind, result: r }) =>
      `| ${round} | ${build} | ${kind} | ${r.seconds.toFixed(2)} | ${fmt(UPDATES / r.seconds)} | ${perTx(r.cpu.assembler)} | ${perTx(r.cpu.mainThread)} | ${perTx(r.cpu.walsender)} | ${perTx(r.cpu.server)} | ${r.tailReads === null ? '—' : fmt(r.tailReads)} | ${r.prefetchHits === null ? '—' : fmt(r.prefetchHits)} | ${r.peakRssMiB} |`,
  ),
].join('\n');
const ratios = BUILDS.map(({ label }) => {
  const values: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const of = (kind: Run['kind']) => runs.find((r) => r.round === round && r.build === label && r.kind === kind)?.result.seconds;
    const s = of('streaming');
    const d = of('downtime');
    if (s && d) values.push(s / d);
  }
  return `| ${label} | ${values.length ? median(values).toFixed(2) : '—'} | ${values.length ? `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}` : '—'} | ${values.map((v) => v.toFixed(2)).join(', ')} | ≥ 0.5 |`;
});
const cpus = os.cpus();
const now = new Date();
const report = `# Restart after downtime: a backlog over streams the assembler does not know

Command: \`${process.env.EA_BENCH_TLS === '1' ? 'EA_BENCH_TLS=1 ' : ''}${LIMITS ? `EA_BENCH_DOWNTIME_LIMITS='${JSON.stringify(LIMITS)}' ` : ''}EA_BENCH_DOWNTIME_STREAMS=${STREAMS} EA_BENCH_DOWNTIME_UPDATES=${UPDATES} EA_BENCH_DOWNTIME_ROUNDS=${ROUNDS} EA_BENCH_DOWNTIME_BUILDS=${BUILDS.map((b) => `${b.label}=${b.dir}`).join(',')} npm run bench:downtime\`

Machine: ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown'}; Node ${process.version}, the assembler with \`${NODE_ARGS.join(' ')}\`; load average at the start ${loadAtStart.map((l) => l.toFixed(2)).join(' / ')}, at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}.
Run at ${now.toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${gitCommit()}.

Working set ${fmt(STREAMS)} streams; each run ${fmt(UPDATES)} single-order transactions committed while the assembler was stopped. "streaming": inserts of new orders (nothing to learn); "downtime": updates of distinct existing orders, none cached.

${table}

Downtime drain as a share of the streaming rate (streaming seconds / downtime seconds, per round):

| build | median | spread | rounds | target |
|---|---:|---:|---|---|
${ratios.join('\n')}
`;
console.log(report);
if (process.env.EA_BENCH_WRITE === '1') log(`written ${writeResult('downtime', report, now)}`);
