/**
 * Append lanes: appends to different streams run concurrently, each stream keeps its order.
 *
 * Streams are spread over the lanes by a hash of the name; each lane has its own sink (a sink
 * applies its calls one at a time, in call order). A unit whose streams all fall in one lane
 * queues there. A unit whose streams fall in several lanes waits until each of those lanes has
 * finished what was queued before it, runs as one call (one atomic append in multi-stream
 * mode) on the first of them, and holds the others until it is done; afterwards every involved
 * sink forgets those streams, so no sink appends from a stale revision.
 *
 * After a failed append nothing queued behind it in its lanes runs: a later unit landing in a
 * stream before an earlier one would make the earlier one look like an old replay.
 */
import type { AppendOutcome, Sink, SinkBatch } from '../sink/index.js';
import { EventAssemblerError } from '../errors.js';

export interface AppendLanes {
  /** Queues the unit; resolves when it (and everything queued before it in its lanes) is durable. */
  append(batch: SinkBatch): Promise<AppendOutcome>;
  /** Units queued or running. */
  readonly inFlight: number;
  /** Resolves when nothing is queued or running (failures included). */
  drain(): Promise<void>;
  /** Resolves when fewer than `n` units are queued or running. */
  whenBelow(n: number): Promise<void>;
  readonly size: number;
}

/** FNV-1a, 32 bit: stable across processes (lanes are not persisted, but a stable spread is easier to reason about). */
export function laneOf(stream: string, lanes: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < stream.length; i++) {
    hash ^= stream.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % lanes;
}

export function createAppendLanes(sinks: readonly Sink[]): AppendLanes {
  if (sinks.length === 0) throw new RangeError('at least one sink');
  // Each lane's tail settles to `true` when everything queued in it succeeded.
  const tails: Promise<boolean>[] = sinks.map(() => Promise.resolve(true));
  let inFlight = 0;
  let roomWaiters: { n: number; resolve: () => void }[] = [];

  function whenBelow(n: number): Promise<void> {
    if (inFlight < n) return Promise.resolve();
    return new Promise((resolve) => roomWaiters.push({ n, resolve }));
  }

  return {
    size: sinks.length,
    get inFlight() {
      return inFlight;
    },
    append(batch) {
      const streams = [...new Set(batch.events.map((e) => e.stream))];
      const involved = [...new Set(streams.map((s) => laneOf(s, sinks.length)))].sort((a, b) => a - b);
      if (involved.length === 0) involved.push(0);
      const before = involved.map((l) => tails[l]!);
      inFlight += 1;
      const run = Promise.all(before).then(async (oks) => {
        if (!oks.every(Boolean)) {
          throw new EventAssemblerError('PIPELINE_APPEND_BLOCKED', 'not appended: an earlier append to one of its streams failed', { streams });
        }
        const sink = sinks[involved[0]!]!;
        try {
          return await sink.append(batch);
        } finally {
          if (involved.length > 1) for (const l of involved) sinks[l]!.forget?.(streams);
        }
      });
      const settled = run.then(
        () => true,
        () => false,
      );
      for (const l of involved) tails[l] = settled;
      void settled.then(() => {
        inFlight -= 1;
        const ready = roomWaiters.filter((w) => inFlight < w.n);
        if (ready.length > 0) {
          roomWaiters = roomWaiters.filter((w) => inFlight >= w.n);
          for (const w of ready) w.resolve();
        }
      });
      return run;
    },
    drain: () => whenBelow(1),
    whenBelow,
  };
}
