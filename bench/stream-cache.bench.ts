// Memory of the sink's stream-state cache (limits.maxCachedStreams), per cached stream:
//
//   node --expose-gc --import tsx bench/stream-cache.bench.ts
//
// Fills a cache of 100,000 streams (13-character names) with states as appends teach them —
// one unit's receipt shared by all, as a bulk transaction leaves them — and prints the heap
// bytes per stream after a full GC.
import { createStreamStates } from '../src/sink/stream-states.js';
import type { PreparedEvent } from '../src/sink/encoding.js';

const N = Number(process.env.EA_BENCH_STREAMS ?? 100_000);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const states = createStreamStates({
  maxCachedStreams: N,
  reader: { readTail: () => Promise.reject(new Error('no reads')), readBackWhile: () => Promise.resolve([]), readLogHead: () => Promise.resolve(-1n), close: () => Promise.resolve() },
  logger: { info() {}, warn() {} },
  retrying: (_operation, _details, call) => call(),
  stats: { tailReads: 0, logHeadReads: 0, prefetchHits: 0 },
});
const unit = { kind: 'transaction' as const, assembler: 'orders', source: '7391029384756102938', commitLsn: '0/53AD328', xid: 743 };
gc();
const before = process.memoryUsage().heapUsed;
for (let i = 0; i < N; i++) {
  const last = { receiptParts: { unit, ordinal: i, count: N, scope: 'unit' as const } } as unknown as PreparedEvent;
  states.learned(`order-${1_000_000 + i}`, BigInt(i % 50), last);
}
gc();
const after = process.memoryUsage().heapUsed;
console.log(`${states.size} cached streams: ${Math.round((after - before) / N)} bytes each (${((after - before) / 2 ** 20).toFixed(1)} MiB)`);
