// Restart after downtime: a backlog of single-stream units over streams the sink has never seen,
// part of it applied by an earlier run that stopped before acknowledging, fed through the
// pipeline's appender as the pipeline feeds it (a bounded window). The sink reads the streams'
// tails ahead of their calls (look-ahead) and every event still lands exactly once; a look-ahead
// made stale by another instance's write meanwhile goes through the conflict handling, never
// duplicating or losing an event. Real client over gRPC, in-memory KurrentDB.
import { describe, expect, it } from 'vitest';
import { createAppender } from '../../src/pipeline/appender.js';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import type { KurrentDBSink, SinkBatch, TransactionSinkPosition } from '../../src/sink/index.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { sinkFactory, useInMemoryKurrentDB, type LogLine } from '../support/kurrentdb-rig.js';

const { cleanups, server } = useInMemoryKurrentDB();
const sink = sinkFactory(cleanups, { checkpointStream: false });

const SYSTEM_ID = '7391029384756102938';
const STREAMS = 1_200;
/** Units in flight at most, as the pipeline's maxInFlightTransactions bounds them. */
const WINDOW = 400;

function position(n: number): TransactionSinkPosition {
  const commitLsn = `0/${(0x10000 + n * 0x100).toString(16).toUpperCase()}`;
  return { checkpoint: `v1:${SYSTEM_ID}:1:slot_a:${commitLsn}:${800 + n}`, commitLsn, xid: 800 + n, systemId: SYSTEM_ID };
}

/** Transaction `n`: one event in `stream` (a single-order update). */
function unit(n: number, stream: string): SinkBatch {
  return { position: position(n), events: [{ id: uuidv5(JSON.stringify(['prefetch', n])), stream, type: 'OrderStatusChanged', data: { n }, metadata: { contract: 'OrderStatusChanged@1' } }] };
}

/** The working set: one unit per stream, creating it. */
const creates = Array.from({ length: STREAMS }, (_, i) => unit(i, `order-${i}`));
/** The backlog: every stream once (in a scattered order), then a third of them a second time. */
const backlog = [
  ...Array.from({ length: STREAMS }, (_, k) => unit(STREAMS + k, `order-${(k * 7) % STREAMS}`)),
  ...Array.from({ length: STREAMS / 3 }, (_, k) => unit(2 * STREAMS + k, `order-${(k * 13) % STREAMS}`)),
];

/** Feeds `units` through a fresh appender over `target`, at most WINDOW in flight (the pipeline's backpressure). */
async function feed(target: KurrentDBSink, units: readonly SinkBatch[]) {
  const appender = createAppender(target);
  const outcomes = [];
  for (const batch of units) {
    await appender.whenBelow(WINDOW);
    outcomes.push(appender.append(batch));
  }
  return Promise.all(outcomes);
}

function ids(db: InMemoryKurrentDB, stream: string): string[] {
  return db.readStreamEvents(stream).map((event) => event.id);
}

/** Every stream holds exactly the given units' events for it, in unit order. */
function expectExactlyOnce(db: InMemoryKurrentDB, units: readonly SinkBatch[]): void {
  const expected = new Map<string, string[]>();
  for (const u of units) for (const event of u.events) expected.set(event.stream, [...(expected.get(event.stream) ?? []), event.id]);
  const wrong = [...expected].filter(([stream, list]) => JSON.stringify(ids(db, stream)) !== JSON.stringify(list));
  expect(wrong.length).toBe(0);
  expect(wrong.slice(0, 3).map(([stream, list]) => ({ stream, expected: list, actual: ids(db, stream) }))).toEqual([]);
}

describe('sink look-ahead after a restart', () => {
  it.each(['multi-stream', 'per-stream'] as const)(
    '%s: a backlog over 1,200 streams the sink has not seen, part of it already applied, lands exactly once with its tails read ahead',
    async (mode) => {
      const db = await server();
      const first = await sink(db, { assembler: 'orders', mode });
      await feed(first, creates);
      await first.close();

      // A run that stopped before acknowledging: it applied part of the backlog (per stream in order:
      // the first touches of the first 300 units, and every 10th one after them).
      const applied = backlog.filter((_, k) => k < STREAMS && (k < 300 || k % 10 === 0));
      const stopped = await sink(db, { assembler: 'orders', mode });
      await feed(stopped, applied);
      await stopped.close();

      // The restart: the whole backlog again, the sink knowing no stream.
      const restarted = await sink(db, { assembler: 'orders', mode });
      const outcomes = await feed(restarted, backlog);
      expect(outcomes.reduce((n, o) => n + o.skipped, 0)).toBe(applied.length);
      expect(outcomes.reduce((n, o) => n + o.appended, 0)).toBe(backlog.length - applied.length);
      expectExactlyOnce(db, [...creates, ...backlog]);
      const status = restarted.status();
      expect(status.firstTouch).toBe('read');
      // Most first touches were answered by a look-ahead read, and each stream was read about once.
      expect(status.prefetchHits).toBeGreaterThan(STREAMS / 2);
      expect(status.tailReads).toBeLessThan(STREAMS * 1.2);
      // On this plain-text connection every tail read was answered on the hand-framed connection.
      expect(status.framedTailReads).toBe(status.tailReads);
    },
  );

  it('a look-ahead made stale by another instance appending meanwhile: the conflict is explained by the receipt, every event once', async () => {
    const db = await server();
    const first = await sink(db, { assembler: 'orders', mode: 'multi-stream' });
    await feed(first, creates);
    await first.close();

    const logs: LogLine[] = [];
    const restarted = await sink(db, { assembler: 'orders', mode: 'multi-stream' }, logs);
    // Its first unit meets an existing stream: from now on first touches read tails (and look ahead).
    await restarted.append(backlog[0]!);
    expect(restarted.status().firstTouch).toBe('read');
    // The streams of the rest of the backlog, but the one just appended to (cached: not read ahead).
    const streams = [...new Set(backlog.slice(1).flatMap((u) => u.events.map((e) => e.stream)))].filter((stream) => stream !== backlog[0]!.events[0]!.stream);
    const reads = restarted.status().tailReads!;
    expect(restarted.prefetch!(streams)).toBe(true);
    await waitFor(() => restarted.status().tailReads! >= reads + streams.length);
    // Another instance of the same assembler (e.g. one that had not yet noticed it was replaced)
    // delivers 200 of the backlog's units after those tails were read.
    const zombie = await sink(db, { assembler: 'orders', mode: 'multi-stream' });
    const moved = backlog.slice(1, STREAMS).filter((_, k) => k % 7 === 0).slice(0, 200);
    await feed(zombie, moved);
    await zombie.close();

    const outcomes = await feed(restarted, backlog.slice(1));
    expect(outcomes.reduce((n, o) => n + o.skipped, 0)).toBe(moved.length);
    // Stale look-ahead states met the zombie's writes (200 here when every read was back before it wrote).
    expect(logs.filter((line) => line.message.includes('an earlier attempt had landed')).length).toBeGreaterThan(0);
    expectExactlyOnce(db, [...creates, ...backlog]);
    expect(restarted.status().prefetchHits).toBeGreaterThan(STREAMS / 2);
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached within the deadline');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
