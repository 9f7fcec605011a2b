// CPU of the in-memory KurrentDB (src/testing/kurrentdb) per unit of work, measured on its own
// process (bench/lib/kurrentdb-server.ts, /proc CPU time) while this process drives it:
//   1. appends: the sink's `appendMany` of invoicing-like units (one event each, the pipeline's
//      ~23 metadata keys, a new stream each) in batches of BATCH → v2 AppendSession, one request
//      per stream: server µs per appended event;
//   2. tail reads (Streams.Read backwards, 1 event) as the sink makes them: one HTTP/2 request
//      each (src/sink/h2-read.ts) 16 at a time, and through the client's native bridge 64 at a
//      time: server µs per read;
//   3. a `$all` subscription with a stream-name prefix filter (as the consumer kit and the
//      latency probe subscribe): catch-up over everything written, then live delivery while
//      units are appended at RATE per second — measured against the same paced appends without a
//      subscriber: server µs per delivered event, and the subscriber's lag (append sent → seen).
//
//   node --import tsx bench/server-cpu.bench.ts [events=30000]
//   EA_BENCH_SERVERS="before=.tmp/srv-base/index.js,after=.tmp/srv-new/index.js" ROUNDS=2 …
// EA_BENCH_SERVERS names the server builds to compare (label=module exporting startInMemoryKurrentDB,
// optionally @node options for its process, space-separated), run interleaved A B, B A, …; without it, the server bench/lib/subject.ts loads. RATE (default 5000
// events/s) paces the live phase; BATCH (default 220) is the streams per multi-stream append.
//
// Measured 2026-12-02 (2 cores shared with other helpers' runs: load average 7.5–9.8, so noisy;
// medians of 3 interleaved rounds), server CPU µs — before (9e014f7) → after (this commit's parent
// chain: read codec, raw HTTP/2 reads and subscriptions, fewer allocations per append):
//   30,000 events: append 24.3 → 23.7, paced append 22.0 → 17.7, tail read h2 120 → 60.5,
//   tail read bridge 124.5 → 48.5, catch-up 38.7 → 11.3, live delivery 33.3 → 9.3 per event
//   60,000 events (appends only): append 29.0 → 23.5
//   EA_BENCH_SERVERS="before=.tmp/srv-base/index.js,after=.tmp/srv-final/index.js" ROUNDS=3 \
//     node --import tsx bench/server-cpu.bench.ts 30000       (each build: esbuild of src/testing/kurrentdb)
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { BACKWARDS, END, KurrentDBClient, START, streamNameFilter } from '@kurrent/kurrentdb-client';
import { createKurrentDBSink } from '../src/sink/index.js';
import type { SinkBatch } from '../src/sink/index.js';
import { createH2TailReader } from '../src/sink/h2-read.js';
import { readerConnectionString } from '../src/sink/reader-connection.js';
import { startKurrentDBProcess, type ServerProcess } from './lib/kurrentdb-server.js';
import { cpuSeconds } from './lib/proc-cpu.js';

const EVENTS = Number(process.argv[2] ?? 30_000);
const BATCH = Number(process.env.BATCH ?? 220);
const RATE = Number(process.env.RATE ?? 5_000);
const ROUNDS = Math.max(1, Number(process.env.ROUNDS ?? 1));
/** Which measurements after the appends (all by default): `reads`, `catch-up`, `live` — e.g. PHASES=reads for a profile of reads. */
const PHASES = new Set((process.env.PHASES ?? 'reads,catch-up,live').split(','));
const SERVERS = (process.env.EA_BENCH_SERVERS ?? '').split(',').filter(Boolean).map((s) => {
  const label = s.slice(0, s.indexOf('='));
  const [module, nodeArgs] = s.slice(s.indexOf('=') + 1).split('@');
  return { label, module: module ?? '', nodeArgs: nodeArgs ?? process.env.EA_BENCH_SERVER_NODE_ARGS ?? '' };
});
if (SERVERS.length === 0) SERVERS.push({ label: 'subject', module: '', nodeArgs: process.env.EA_BENCH_SERVER_NODE_ARGS ?? '' });

/** One invoicing-like unit: one event on its own stream, the metadata the pipeline writes. */
function unit(prefix: string, n: number, sentAt = 0): SinkBatch {
  const commitLsn = `0/${(0x1000000 + n * 0x200).toString(16).toUpperCase()}`;
  const checkpoint = `v1:7391029384756102938:1:slot:${commitLsn}:${n}`;
  return {
    position: { checkpoint, commitLsn, xid: 1000 + n, systemId: '7391029384756102938' },
    events: [{
      id: randomUUID(), stream: `${prefix}-b${n}`, type: 'InvoiceDrafted',
      data: { invoiceId: `b${n}`, customerId: `c${n % 100}`, currency: 'EUR', total: '60.00', lines: [{ lineNo: 1, description: 'Consulting', quantity: 1, unitPrice: '10.00', amount: '10.00' }, { lineNo: 2, description: 'Travel', quantity: 2, unitPrice: '10.00', amount: '20.00' }, { lineNo: 3, description: 'Licence', quantity: 3, unitPrice: '10.00', amount: '30.00' }] },
      metadata: {
        'source.checkpoint': checkpoint, 'source.commitLsn': commitLsn, 'source.xid': String(1000 + n), 'source.commitTime': new Date(sentAt || Date.now()).toISOString(),
        origin: 'change', 'source.tables': 'public.invoice,public.invoice_line', 'source.operations': 'insert', '$correlationId': `7391029384756102938:${commitLsn}:${1000 + n}`,
        mapper: 'invoice-lifecycle', assembler: 'serverbench', 'entity.type': 'invoice', 'entity.id': `b${n}`, contract: 'InvoiceDrafted@1', 'transaction.index': '0', 'transaction.count': '1',
        'bench.sentAt': String(sentAt),
      },
    }],
  };
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

/** Server CPU µs spent by `work`, per `units` units. */
async function serverCpu(server: ServerProcess, units: number, work: () => Promise<void>): Promise<number> {
  const c0 = cpuSeconds(server.pid)!;
  await work();
  return ((cpuSeconds(server.pid)! - c0) * 1e6) / units;
}

/** Appends units `from … from+count` at `rate` per second (in a batch every 20 ms), or at once (rate 0). */
async function appendUnits(sink: Awaited<ReturnType<typeof createKurrentDBSink>>, prefix: string, from: number, count: number, rate: number): Promise<void> {
  if (rate <= 0) {
    for (let i = 0; i < count; i += BATCH) await sink.appendMany(range(from + i, Math.min(BATCH, count - i)).map((n) => unit(prefix, n)));
    return;
  }
  const t0 = performance.now();
  for (let sent = 0; sent < count; ) {
    const due = Math.min(count, Math.floor(((performance.now() - t0) / 1000) * rate) + 1);
    if (due > sent) {
      const now = Date.now();
      await sink.appendMany(range(from + sent, due - sent).map((n) => unit(prefix, n, now)));
      sent = due;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Subscribes to `$all` (streams starting with `prefix-`); resolves `done` once `expected` events arrived. */
function subscribe(client: KurrentDBClient, prefix: string, from: typeof START | typeof END, expected: number) {
  const lags: number[] = [];
  let seen = 0;
  let resolveDone: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const subscription = client.subscribeToAll({ fromPosition: from, filter: streamNameFilter({ prefixes: [`${prefix}-`] }) });
  const confirmed = new Promise<void>((resolve) => subscription.once('confirmation', () => resolve()));
  subscription.on('data', (resolved) => {
    if (!resolved.event) return;
    let metadata = resolved.event.metadata as unknown;
    if (metadata instanceof Uint8Array) metadata = JSON.parse(Buffer.from(metadata).toString('utf8'));
    const sentAt = Number((metadata as Record<string, string> | undefined)?.['bench.sentAt'] ?? 0);
    if (sentAt > 0) lags.push(Date.now() - sentAt);
    if (++seen === expected) resolveDone();
  });
  subscription.on('error', () => undefined);
  return { confirmed, done, lags, stop: () => subscription.unsubscribe().catch(() => undefined) };
}

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)] ?? Number.NaN;

interface Figures { append: number; readH2: number; readBridge: number; catchUp: number; paced: number; live: number; lagP50: number; lagP99: number }

async function measure(): Promise<Figures> {
  const server = await startKurrentDBProcess(0);
  const sink = await createKurrentDBSink({ connectionString: server.connectionString, assembler: 'serverbench', checkpointStream: false });
  const client = KurrentDBClient.connectionString(server.connectionString);
  const bridge = KurrentDBClient.connectionString(readerConnectionString(server.connectionString));
  const h2 = createH2TailReader(client)!;
  try {
    // Warm-up of every path (JIT, connections, the bridge's discovery).
    await appendUnits(sink, 'warm', 0, 2_000, 0);
    for (const n of range(0, 200)) await h2.readTail(`warm-b${n}`);
    for await (const _ of bridge.readStream('warm-b0', { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) void _;
    const warm = subscribe(client, 'warm', START, 2_000);
    await warm.done;
    await warm.stop();

    const append = await serverCpu(server, EVENTS, () => appendUnits(sink, 'invoice', 0, EVENTS, 0));
    const reads = Math.min(EVENTS, 20_000);
    const readAll = async (concurrency: number, read: (stream: string) => Promise<boolean>) => {
      let next = 0;
      let found = 0;
      await Promise.all(range(0, concurrency).map(async () => {
        while (next < reads) if (await read(`invoice-b${next++}`)) found++;
      }));
      if (found !== reads) throw new Error(`${reads - found} tail reads found nothing`);
    };
    const readH2 = !PHASES.has('reads') ? NaN : await serverCpu(server, reads, () => readAll(16, async (s) => (await h2.readTail(s)).kind === 'event'));
    const readBridge = !PHASES.has('reads') ? NaN : await serverCpu(server, reads, () => readAll(64, async (s) => {
      for await (const resolved of bridge.readStream(s, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) if (resolved.event?.revision === 0n) return true;
      return false;
    }));

    let catchUp = NaN;
    if (PHASES.has('catch-up')) {
      const catchUpSubscription = subscribe(client, 'invoice', START, EVENTS);
      catchUp = await serverCpu(server, EVENTS, () => catchUpSubscription.done);
      await catchUpSubscription.stop();
    }
    if (!PHASES.has('live')) return { append, readH2, readBridge, catchUp, paced: NaN, live: NaN, lagP50: NaN, lagP99: NaN };

    const paced = await serverCpu(server, EVENTS, () => appendUnits(sink, 'paced', 0, EVENTS, RATE));
    const live = subscribe(client, 'live', END, EVENTS);
    await live.confirmed;
    const pacedLive = await serverCpu(server, EVENTS, async () => {
      await appendUnits(sink, 'live', 0, EVENTS, RATE);
      await live.done;
    });
    await live.stop();
    return { append, readH2, readBridge, catchUp, paced, live: pacedLive - paced, lagP50: percentile(live.lags, 50), lagP99: percentile(live.lags, 99) };
  } finally {
    h2.close();
    await sink.close();
    await Promise.all([client.dispose(), bridge.dispose()]);
    await server.stop();
  }
}

console.log(`server-cpu bench: ${EVENTS} events, batches of ${BATCH}, live at ${RATE}/s, ${ROUNDS} round(s); load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
const pad = (s: string | number, n: number) => String(s).padStart(n);
console.log(`${pad('server', 8)} ${pad('round', 5)} | µs server CPU per: ${pad('append', 6)} ${pad('read h2', 7)} ${pad('read bridge', 11)} ${pad('catch-up', 8)} ${pad('live', 6)} (paced append ${pad('', 4)}) | live lag p50/p99 ms`);
for (let round = 1; round <= ROUNDS; round++) {
  for (const { label, module, nodeArgs } of round % 2 === 1 ? SERVERS : [...SERVERS].reverse()) {
    if (module) process.env.EA_BENCH_SERVER_MODULE = module;
    else delete process.env.EA_BENCH_SERVER_MODULE;
    process.env.EA_BENCH_SERVER_NODE_ARGS = nodeArgs;
    const f = await measure();
    console.log(
      `${pad(label, 8)} ${pad(round, 5)} | ${pad('', 19)}${pad(f.append.toFixed(1), 6)} ${pad(f.readH2.toFixed(1), 7)} ${pad(f.readBridge.toFixed(1), 11)} ${pad(f.catchUp.toFixed(1), 8)} ${pad(f.live.toFixed(1), 6)} (${pad(f.paced.toFixed(1), 17)}) | ${f.lagP50} / ${f.lagP99}`,
    );
  }
}
console.log(`load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
