// Stream tail reads (what the sink does for every stream it holds no state for), three ways:
// through the client's native bridge (`readStream` backwards from the end, one event, a client
// from `readerConnectionString`), one node:http2 request per read (`createH2TailReader`), and as
// frames on a hand-framed connection (`createFramedTailReader`, src/sink/h2-frames.ts: what the
// sink's reader tries first). The in-memory KurrentDB runs in its own process; the figures are this
// process's: reads/s and CPU µs per read (process.cpuUsage, all threads — the bridge's too).
// It imports the sources (like sink.bench.ts), whatever EA_BENCH_FROM says:
//   EA_BENCH_FROM=src node --import tsx bench/tail-read.bench.ts [streams=20000]
// EA_BENCH_TLS=1: the server serves TLS (bench/lib/kurrentdb-server.ts), every path reads over it.
// READS_SERIAL (default 2000) caps the reads at concurrency 1 (the bridge takes ~8 ms each).
//
// Measured 2026-12-01 (2 cores shared with another engineer's runs: load average 2.5–3.6, so
// noisy; an earlier run at load 1.0 gave the same picture), reads/s and µs CPU/read:
//   concurrency 1:   bridge   218/s 268 µs | http2 2,494/s 192 µs   (latency 4.6 ms → 0.4 ms)
//   concurrency 16:  bridge 4,476/s  82 µs | http2 6,070/s  78 µs
//   concurrency 64:  bridge 6,400/s  62 µs | http2 6,491/s  69 µs
//   concurrency 256: bridge 6,666/s  66 µs | http2 6,249/s  72 µs
//   ReadReq by hand 0.26 µs, through google-protobuf 4.4 µs.
// At 64+ in flight the HTTP/2 path saves no CPU: node:http2 itself costs ~45–50 µs per request
// here (a bare `session.request` loop; Node 20 binds an AsyncResource and builds two
// `util.deprecate` wrappers per request, plus a Duplex per stream and its GC). A hand-framed
// HTTP/2 connection prototype read the same tails at ~10 µs CPU/read (decoding included).
// The frames column, 2026-12-03 on a quiet machine (load 0.48 at the start; this machine was ~2×
// slower than on 2026-12-01 that day), reads/s and µs CPU/read, bridge | http2 | frames:
//   concurrency 1:   909/s 522 µs | 2,604/s 311 µs | 5,263/s 103 µs
//   concurrency 64:  5,644/s 170 µs | 4,905/s 141 µs | 9,955/s 24 µs
// (bench/results/2026-12-03-framed-tail-reads.md). Over TLS (EA_BENCH_TLS=1, 2026-12-03), at 64
// in flight: 5,514/s 179 µs | 4,968/s 134 µs | 7,770/s 30 µs (bench/results/2026-12-03-tls.md).
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { BACKWARDS, END, KurrentDBClient } from '@kurrent/kurrentdb-client';
import streamsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_pb.js';
import sharedPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/shared_pb.js';
import { createH2AppendTransport } from '../src/sink/h2-append.js';
import { createFramedTailReader, createH2TailReader } from '../src/sink/h2-read.js';
import { transportOf } from '../src/sink/h2-transport.js';
import { readerConnectionString } from '../src/sink/reader-connection.js';
import { receiptToMetadata } from '../src/sink/receipt.js';
import { encodeAppendRecordSized } from '../src/sink/v2-append.js';
import { encodeTailReadRequest } from '../src/sink/v1-read.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';

const STREAMS = Number(process.argv[2] ?? 20_000);
const READS_SERIAL = Number(process.env.READS_SERIAL ?? 2_000);
const CONCURRENCY = [1, 16, 64, 256];

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

console.log(`tail-read bench (sources through tsx): ${STREAMS} streams; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
const server = await startKurrentDBProcess(0);
const transport = transportOf(server.connectionString);
console.log(`connection: ${transport.scheme === 'https' ? 'TLS' : 'plain text'}`);
const writer = KurrentDBClient.connectionString(server.connectionString);
const append = createH2AppendTransport(writer, { transport })!;

// One event per stream with the metadata the pipeline writes (~20 string keys, the receipt's included).
const streams = Array.from({ length: STREAMS }, (_, i) => `invoice-${i}-${randomUUID().slice(0, 8)}`);
for (let i = 0; i < STREAMS; i += 500) {
  await append.append(
    streams.slice(i, i + 500).map((stream, j) => {
      const n = i + j;
      const commitLsn = `0/${(0x1000000 + n * 0x200).toString(16).toUpperCase()}`;
      const metadata = {
        'source.checkpoint': `v1:7391029384756102938:1:slot:${commitLsn}:${n}`, 'source.commitLsn': commitLsn, 'source.xid': String(1000 + n),
        'source.commitTime': '2026-11-30T02:00:00.123456Z', origin: 'change', 'source.tables': 'public.invoice,public.invoice_line',
        mapper: 'invoice-lifecycle', assembler: 'bench', 'entity.type': 'invoice', 'entity.id': `b${n}`, contract: 'InvoiceDrafted@1',
        ...receiptToMetadata({ kind: 'transaction', assembler: 'bench', source: '7391029384756102938', commitLsn, xid: 1000 + n, ordinal: 0, count: 1 }),
      };
      return { streamName: stream, expectedState: 'no_stream' as const, records: [encodeAppendRecordSized(randomUUID(), 'InvoiceDrafted', JSON.stringify({ invoiceId: `b${n}`, total: '60.00' }), metadata).record] };
    }),
  );
}
append.close();

type ReadTail = (stream: string) => Promise<{ revision: bigint } | null>;

const bridgeClient = KurrentDBClient.connectionString(readerConnectionString(server.connectionString));
const viaBridge: ReadTail = async (stream) => {
  for await (const resolved of bridgeClient.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
    if (resolved.event) return { revision: resolved.event.revision };
  }
  return null;
};
const h2Client = KurrentDBClient.connectionString(server.connectionString);
const reader = createH2TailReader(h2Client, transport)!;
const viaH2: ReadTail = async (stream) => {
  const tail = await reader.readTail(stream);
  return tail.kind === 'event' ? { revision: tail.revision } : null;
};

const framedClient = KurrentDBClient.connectionString(server.connectionString);
const framedReader = createFramedTailReader(framedClient, { transport })!;
const viaFrames: ReadTail = async (stream) => {
  const tail = await framedReader.readTail(stream);
  if (!tail) throw new Error('the framed reader gave a read back');
  return tail.kind === 'event' ? { revision: tail.revision } : null;
};

/** `reads` tail reads, `concurrency` at a time, over the streams in order (wrapping). */
async function run(read: ReadTail, reads: number, concurrency: number, offset: number): Promise<{ perSecond: number; cpuUs: number }> {
  let next = 0;
  let found = 0;
  const c0 = cpuMs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < reads) {
        const i = next++;
        if ((await read(streams[(offset + i) % STREAMS]!))?.revision === 0n) found += 1;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuMs() - c0;
  if (found !== reads) throw new Error(`${reads - found} of ${reads} reads found no event at revision 0`);
  return { perSecond: reads / seconds, cpuUs: (cpu * 1000) / reads };
}

// Warm-up: connections, the bridge's discovery, JIT.
await run(viaBridge, 2_000, 64, 0);
await run(viaH2, 2_000, 64, 0);
await run(viaFrames, 2_000, 64, 0);

const pad = (s: string | number, n: number) => String(s).padStart(n);
console.log(`${pad('concurrency', 11)} ${pad('reads', 6)} | ${pad('bridge reads/s', 14)} ${pad('µs CPU/read', 11)} | ${pad('http2 reads/s', 14)} ${pad('µs CPU/read', 11)} | ${pad('frames reads/s', 14)} ${pad('µs CPU/read', 11)}`);
for (const concurrency of CONCURRENCY) {
  const reads = concurrency === 1 ? Math.min(READS_SERIAL, STREAMS) : STREAMS;
  const cells = [];
  for (const read of [viaBridge, viaH2, viaFrames]) {
    const r = await run(read, reads, concurrency, concurrency * 7);
    cells.push(`${pad(Math.round(r.perSecond), 14)} ${pad(r.cpuUs.toFixed(1), 11)}`);
  }
  console.log(`${pad(concurrency, 11)} ${pad(reads, 6)} | ${cells.join(' | ')}`);
}

// The request: by hand (v1-read.ts) or through google-protobuf (as the client builds a ReadReq).
function viaProtobuf(stream: string): Uint8Array {
  const identifier = new sharedPb.StreamIdentifier();
  identifier.setStreamName(Buffer.from(stream, 'utf8'));
  const streamOptions = new streamsPb.ReadReq.Options.StreamOptions();
  streamOptions.setStreamIdentifier(identifier);
  streamOptions.setEnd(new sharedPb.Empty());
  const uuidOption = new streamsPb.ReadReq.Options.UUIDOption();
  uuidOption.setString(new sharedPb.Empty());
  const options = new streamsPb.ReadReq.Options();
  options.setStream(streamOptions);
  options.setReadDirection(streamsPb.ReadReq.Options.ReadDirection.BACKWARDS);
  options.setCount('1');
  options.setNoFilter(new sharedPb.Empty());
  options.setUuidOption(uuidOption);
  const request = new streamsPb.ReadReq();
  request.setOptions(options);
  return request.serializeBinary();
}
if (!Buffer.from(viaProtobuf(streams[0]!)).equals(encodeTailReadRequest(streams[0]!).subarray(5))) throw new Error('the hand-encoded ReadReq differs from google-protobuf\'s');
for (const [name, encode] of [['by hand', encodeTailReadRequest], ['google-protobuf', viaProtobuf]] as const) {
  const t0 = performance.now();
  for (let i = 0; i < 200_000; i++) encode(streams[i % STREAMS]!);
  console.log(`ReadReq encoding ${name}: ${(((performance.now() - t0) * 1000) / 200_000).toFixed(2)} µs per request`);
}

reader.close();
framedReader.close();
await Promise.all([writer.dispose(), bridgeClient.dispose(), h2Client.dispose(), framedClient.dispose()]);
await server.stop();
console.log(`load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
