// Multi-stream append latency by streams per call, with the event loop kept busy: BURN ms of
// synchronous work per turn (the pipeline's decoding and mapping do that). Shows why the sink
// writes a whole AppendSession at once (src/sink/h2-append.ts): through grpc-js a client stream
// sends one message — one stream — per event-loop turn.
//   BURN=1 node --import tsx bench/append-turns.bench.ts
// Measured 2026-11-30, 256 streams per call: through grpc-js 328 ms per call with BURN=1 (88 ms
// with BURN=0); as one HTTP/2 write 49–57 ms with BURN=1.
import { randomUUID } from 'node:crypto';
import { createKurrentDBSink } from '../src/sink/index.js';
import type { SinkBatch } from '../src/sink/index.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
const server = await startKurrentDBProcess(0);
const sink = await createKurrentDBSink({ connectionString: server.connectionString, assembler: 'sinkbench', checkpointStream: false });
const unit = (n: number): SinkBatch => ({
  position: { checkpoint: `v1:7391029384756102938:1:slot:0/${(0x1000000 + n * 0x200).toString(16).toUpperCase()}:${n}`, commitLsn: `0/${(0x1000000 + n * 0x200).toString(16).toUpperCase()}`, xid: 1000 + n, systemId: '7391029384756102938' },
  events: [{ id: randomUUID(), stream: `invoice-b${n}`, type: 'InvoiceDrafted', data: { n }, metadata: { a: 'b' } }],
});
let stop = false;
const burn = Number(process.env.BURN ?? 0);
if (burn > 0) { const spin = () => { const t = performance.now(); while (performance.now() - t < burn); if (!stop) setImmediate(spin); }; spin(); }
let n = 0;
for (const streams of [1, 16, 64, 256]) {
  const t0 = performance.now();
  for (let r = 0; r < 5; r++) await sink.appendMany(Array.from({ length: streams }, () => unit(n++)));
  console.log(`burn ${burn} ms/turn: ${streams} streams per call: ${((performance.now() - t0) / 5).toFixed(1)} ms per call`);
}
stop = true;
await sink.close();
await server.stop();
