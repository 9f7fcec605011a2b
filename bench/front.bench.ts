// Front-half profile (needs the build: npx tsc -p tsconfig.build.json --outDir .tmp/bench-build):
// raw reader vs source-only vs null-sink vs in-memory KurrentDB on the same pre-written WAL,
// small enough to iterate on (default 20,000 transactions). For CPU profiles:
//   EA_BENCH_ONLY=source node --cpu-prof --cpu-prof-dir=.tmp/prof --import tsx bench/front.bench.ts
import { PerformanceObserver } from 'node:perf_hooks';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { createBenchDatabase, PUBLICATION, writeInvoicesBulk } from './lib/invoicing-db.js';
import { drainPipeline, nullSink } from './lib/pipeline-run.js';
import { drainRaw } from './lib/raw-reader.js';
import { drainSourceOnly } from './lib/source-only.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';

const N = Number(process.env.EA_BENCH_TRANSACTIONS ?? 20_000);
const ONLY = (process.env.EA_BENCH_ONLY ?? 'raw,source,null,mem0,mem2').split(',');
const server = await startEmbeddedPostgres();
try {
  const db = await createBenchDatabase(server, 'front');
  const captureUrl = server.connectionString({ database: db.name });
  await db.createSlots(['raw', 'source', 'nullsink', 'mem0', 'mem2']);
  await writeInvoicesBulk(db, N);
  const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
  let gcMs = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcMs += entry.duration;
  }).observe({ entryTypes: ['gc'] });
  /** Starts measuring one consumer; the returned function reports its CPU, event-loop use and GC per transaction. */
  const measure = () => {
    const c0 = cpu();
    const elu0 = performance.eventLoopUtilization();
    gcMs = 0;
    return () => {
      const busy = performance.eventLoopUtilization(performance.eventLoopUtilization(), elu0).utilization;
      return `${Math.round(((cpu() - c0) * 1000) / N)} µs CPU/tx in this process, event loop ${Math.round(busy * 100)}% busy, GC pauses ${Math.round((gcMs * 1000) / N)} µs/tx`;
    };
  };
  let perTx = measure();
  const raw = await drainRaw(db.connection, 'raw', PUBLICATION, N, N);
  console.log(`raw: ${raw.seconds.toFixed(2)} s, ${Math.round(N / raw.seconds)} tx/s, ${perTx()}`);
  if (ONLY.includes('source')) {
    perTx = measure();
    const src = await drainSourceOnly(db.connection, 'source', PUBLICATION, N, N);
    console.log(`source only: ${src.seconds.toFixed(2)} s, ${Math.round(N / src.seconds)} tx/s, ratio ${(raw.seconds / src.seconds).toFixed(2)}, ${perTx()}`);
  }
  if (ONLY.includes('null')) {
    perTx = measure();
    const r = await drainPipeline({ captureUrl, slot: 'nullsink', publication: PUBLICATION, sink: nullSink }, raw.markLsn, raw.lastEndLsn);
    console.log(`null sink: ${r.seconds.toFixed(2)} s, ${Math.round(N / r.seconds)} tx/s, ratio ${(raw.seconds / r.seconds).toFixed(2)}, ${perTx()}`);
  }
  for (const [slot, latency] of [['mem0', 0], ['mem2', 2]] as const) {
    if (!ONLY.includes(slot)) continue;
    const kurrent = await startKurrentDBProcess(latency);
    try {
      perTx = measure();
      const r = await drainPipeline({ captureUrl, slot, publication: PUBLICATION, destination: kurrent.connectionString }, raw.markLsn, raw.lastEndLsn);
      console.log(`in-memory ${latency} ms: ${r.seconds.toFixed(2)} s, ${Math.round(N / r.seconds)} tx/s, ratio ${(raw.seconds / r.seconds).toFixed(2)}, ${r.events} events, running after ${r.runningSeconds.toFixed(2)} s, ${JSON.stringify(r.batching)}, ${perTx()}`);
    } finally {
      await kurrent.stop();
    }
  }
} finally {
  await server.destroy();
}
