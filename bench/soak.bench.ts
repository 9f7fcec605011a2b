// Soak: the assembler streaming at a steady rate for a long time, its memory over time (issue 18:
// "a 10-minute soak at 2,000 tx/s keeps RSS flat, growth < 10 % after warm-up").
//
//   npm run bench:soak                                            # 10 minutes at 2,000 tx/s
//   EA_BENCH_SOAK_SCALE=0.05 npm run bench:soak                   # 30 s (every duration × the scale)
//   EA_BENCH_SOAK_RATE=500 EA_BENCH_SOAK_MINUTES=2 npm run bench:soak
//
// The invoicing schema in an embedded PostgreSQL 17, the in-memory KurrentDB in a process of its
// own (0 ms per append), the assembler (production build) in this process — as the latency runs
// of `npm run bench` run it — and the latency driver (bench/lib/latency-driver.ts, a process of
// its own) committing invoices (1 invoice + 3 lines) at EA_BENCH_SOAK_RATE per second for
// EA_BENCH_SOAK_MINUTES × EA_BENCH_SOAK_SCALE. Every EA_BENCH_SOAK_SAMPLE_SECONDS (10, scaled,
// at least 1) it prints this process's RSS and heap (the assembler; the bench's own share is a
// polling loop) and the server's RSS; at the end, the growth from the end of the warm-up (the first
// fifth) to the end, and the writer's commit → durable latency (read back from the destination
// after the run). The load average is read before anything starts. EA_BENCH_WRITE=1 also writes bench/results/<date>-soak.md.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { createBenchDatabase, PUBLICATION } from './lib/invoicing-db.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { runLatencyDriver } from './lib/latency-driver.js';
import { benchAssembler, maxOf, percentile } from './lib/pipeline-run.js';
import { gitCommit, writeResult } from './lib/results.js';

const SCALE = Number(process.env.EA_BENCH_SOAK_SCALE ?? 1);
const RATE = Number(process.env.EA_BENCH_SOAK_RATE ?? 2_000);
const SECONDS = Number(process.env.EA_BENCH_SOAK_MINUTES ?? 10) * 60 * SCALE;
const SAMPLE_MS = Math.max(1, Number(process.env.EA_BENCH_SOAK_SAMPLE_SECONDS ?? 10) * SCALE) * 1000;
const MiB = 2 ** 20;

interface Sample {
  readonly seconds: number;
  readonly rssMiB: number;
  readonly heapMiB: number;
  readonly serverRssMiB: number | null;
  readonly transactions: number;
}

const log = (line: string) => console.error(`[bench:soak ${new Date().toISOString().slice(11, 19)}] ${line}`);
const loadText = (load: number[]) => load.map((l) => l.toFixed(2)).join(' / ');

function rssOf(pid: number): number | null {
  try {
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
    return Number.isNaN(kb) ? null : kb / 1024;
  } catch {
    return null;
  }
}

const loadAtStart = os.loadavg();
log(`load average at start ${loadText(loadAtStart)}; ${RATE} tx/s for ${SECONDS.toFixed(0)} s, a sample every ${(SAMPLE_MS / 1000).toFixed(0)} s`);
const server = await startEmbeddedPostgres();
const kurrent = await startKurrentDBProcess(0);
const samples: Sample[] = [];
let latency: { p50: number; p99: number; max: number; late: number; seen: number; writeSeconds: number } | null = null;
try {
  const db = await createBenchDatabase(server, 'bench_soak');
  const slot = 'bench_soak';
  await db.createSlots([slot]);
  const assembler = benchAssembler({ captureUrl: server.connectionString({ database: db.name }), slot, publication: PUBLICATION, destination: kurrent.connectionString });
  const running = assembler.run();
  running.catch(() => undefined);
  try {
    for (const deadline = Date.now() + 60_000; assembler.status().state !== 'running'; ) {
      if (assembler.status().state === 'failed' || Date.now() > deadline) throw new Error(`soak: the assembler is ${assembler.status().state}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const started = performance.now();
    const sample = () => {
      const memory = process.memoryUsage();
      const s: Sample = {
        seconds: (performance.now() - started) / 1000,
        rssMiB: memory.rss / MiB,
        heapMiB: memory.heapUsed / MiB,
        serverRssMiB: rssOf(kurrent.pid),
        transactions: assembler.status().transactions.appended,
      };
      samples.push(s);
      log(`t=${s.seconds.toFixed(0)} s: assembler RSS ${s.rssMiB.toFixed(0)} MiB (heap ${s.heapMiB.toFixed(0)} MiB), server RSS ${s.serverRssMiB?.toFixed(0) ?? '—'} MiB, ${s.transactions.toLocaleString('en-US')} transactions durable`);
    };
    sample();
    const timer = setInterval(sample, SAMPLE_MS);
    try {
      const driven = await runLatencyDriver({ connection: db.connection, kurrentdb: kurrent.connectionString, count: Math.round(RATE * SECONDS), rate: RATE, prefix: 'soak' });
      const steady = driven.samples.slice(Math.min(2 * RATE, Math.floor(driven.samples.length / 10)));
      latency = { p50: percentile(steady, 50), p99: percentile(steady, 99), max: maxOf(steady), late: driven.late, seen: driven.samples.length, writeSeconds: driven.writeSeconds };
    } finally {
      clearInterval(timer);
      sample();
    }
  } finally {
    await assembler.stop();
  }
} finally {
  await kurrent.stop();
  await server.destroy();
}

// The last sample is taken after the writer's result — one latency sample per transaction, parsed
// in this process — arrived: the harness's memory, not the assembler's. Growth and peak are of the
// samples taken while the writer ran.
const running = samples.length > 2 ? samples.slice(0, -1) : samples;
const warm = running.find((s) => s.seconds >= SECONDS / 5) ?? running[0]!;
const last = running.at(-1)!;
const peak = maxOf(running.filter((s) => s.seconds >= warm.seconds).map((s) => s.rssMiB));
const growth = (last.rssMiB - warm.rssMiB) / warm.rssMiB;
const now = new Date();
const report = `# Soak: the assembler's memory at a steady rate

Command: \`EA_BENCH_SOAK_RATE=${RATE} EA_BENCH_SOAK_MINUTES=${Number(process.env.EA_BENCH_SOAK_MINUTES ?? 10)} EA_BENCH_SOAK_SCALE=${SCALE} npm run bench:soak\`

Machine: ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'unknown'}; Node ${process.version}; load average at the start ${loadText(loadAtStart)}, at the end ${loadText(os.loadavg())}.
Run at ${now.toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${gitCommit()}.

${RATE.toLocaleString('en-US')} transactions/s (1 invoice + 3 lines) for ${SECONDS.toFixed(0)} s; the assembler in the bench process (its RSS is this process's), the in-memory KurrentDB in a process of its own (it keeps every event: its RSS grows by design).

| t (s) | assembler RSS (MiB) | heap used (MiB) | server RSS (MiB) | transactions durable |
|---:|---:|---:|---:|---:|
${samples.map((s) => `| ${s.seconds.toFixed(0)} | ${s.rssMiB.toFixed(0)} | ${s.heapMiB.toFixed(0)} | ${s.serverRssMiB?.toFixed(0) ?? '—'} | ${s.transactions.toLocaleString('en-US')} |`).join('\n')}

The last row is taken after the writer's result (${latency?.seen.toLocaleString('en-US') ?? '—'} latency samples) was parsed in this process: it is not counted below.
After warm-up (t ≥ ${warm.seconds.toFixed(0)} s, until the writer finished at t = ${last.seconds.toFixed(0)} s): RSS ${warm.rssMiB.toFixed(0)} → ${last.rssMiB.toFixed(0)} MiB (${(growth * 100).toFixed(1)} %; target < 10 %), peak ${peak.toFixed(0)} MiB.
Writer: ${latency ? `${latency.seen.toLocaleString('en-US')} events read back; commit → durable p50 ${latency.p50} ms, p99 ${latency.p99} ms, max ${latency.max} ms; ${latency.late} commits behind schedule (> 100 ms); wrote for ${latency.writeSeconds.toFixed(1)} s` : 'no result'}.
`;
console.log(report);
if (process.env.EA_BENCH_WRITE === '1') log(`written ${writeResult('soak', report, now)}`);
