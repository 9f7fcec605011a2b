/**
 * The pipeline's appender: group commit over one sink.
 *
 * Units (a source transaction's or a snapshot record's events) are queued in the order the
 * pipeline hands them over. Whenever a call may start, the queue's head is taken as one batch —
 * as many units as are waiting, up to `maxBatchUnits` units and `maxBatchEvents` events — and
 * appended with one `sink.appendMany` call (one atomic multi-stream append, or concurrent
 * per-stream appends). So at a low rate each unit goes alone (low latency), and under load the
 * batches grow by themselves (high throughput: one round trip carries hundreds of transactions).
 *
 * Up to `maxConcurrentAppends` calls run at once, on disjoint streams only: a unit touching a
 * stream of a call in flight waits — with everything queued behind it — until that call is done.
 * A call starts while another is in flight only when it is large — `minConcurrentUnits` units, or
 * as many as a call may carry; a smaller batch waits for a call to end and grows meanwhile. At a
 * steady few thousand transactions a second the calls then carry more each, and fewer of them cost
 * less CPU (a socket write on a VM's loopback costs ≈ 90 µs) and a shorter tail; a backlog or a
 * snapshot, whose calls are large, still has several in flight
 * (bench/results/2026-12-07-concurrent-calls.md).
 * Batches are taken strictly from the head of the queue, so every stream receives its units in
 * queue order.
 *
 * A unit is handed to the sink when it is queued (`sink.prepare`), and the queue holds what comes
 * back: a sink that encodes its events then lets the pipeline's objects go while the unit waits.
 *
 * Each unit's streams are handed to the sink as a hint when it is queued (`sink.prefetch`): a
 * sink learning the states of streams it has not seen (e.g. a backlog after a restart) reads
 * them ahead, while earlier calls append, instead of when the unit's own call starts.
 *
 * After a failed call nothing queued behind it runs (every later unit is rejected with
 * `PIPELINE_APPEND_BLOCKED`): a later unit landing in a stream before an earlier one would make the
 * earlier one look like an old replay. The pipeline stops on the first failure anyway.
 */
import { EventAssemblerError } from '../errors.js';
import type { AppendOutcome, Sink, SinkBatch } from '../sink/index.js';

export interface AppenderOptions {
  /** Calls in flight at once (on disjoint streams). @default 4 */
  readonly maxConcurrentAppends?: number;
  /** Units per call. @default 512 */
  readonly maxBatchUnits?: number;
  /** Events per call (a single larger unit still goes alone; the sink splits by size). @default 2048 */
  readonly maxBatchEvents?: number;
  /** The fewest units of a call that starts while another is in flight (1: any). @default 64 */
  readonly minConcurrentUnits?: number;
  /** Told how long each call took, in seconds, either way it ended (metrics). @default none */
  readonly onCallDone?: (seconds: number) => void;
}

/** Told once how a queued unit ended (see {@link Appender.appendTo}). Must not throw. */
export interface AppendReceiver {
  appended(outcome: AppendOutcome): void;
  failed(error: unknown): void;
}

export interface Appender {
  /** Queues the unit; resolves when it is durable (and with it everything queued before it in its streams). */
  append(batch: SinkBatch): Promise<AppendOutcome>;
  /**
   * {@link Appender.append}, telling `receiver` instead of settling a promise: a transaction
   * streamed costs no promise, resolving functions or callbacks here (they lived as long as the
   * unit was in flight, and young collections copied them).
   */
  appendTo(batch: SinkBatch, receiver: AppendReceiver): void;
  /** Units queued or being appended. */
  readonly inFlight: number;
  /** Resolves when nothing is queued or running (failures included). */
  drain(): Promise<void>;
  /** Resolves when fewer than `n` units are queued or running. */
  whenBelow(n: number): Promise<void>;
  /** Calls completed, and units they carried (for status: units per call = batching). */
  readonly stats: { readonly calls: number; readonly units: number; readonly largestBatch: number };
}

interface Entry {
  readonly batch: SinkBatch;
  readonly streams: readonly string[];
  readonly receiver: AppendReceiver;
}

export function createAppender(sink: Sink, options: AppenderOptions = {}): Appender {
  const maxConcurrent = options.maxConcurrentAppends ?? 4;
  const maxUnits = options.maxBatchUnits ?? 512;
  const maxEvents = options.maxBatchEvents ?? 2048;
  const minConcurrent = options.minConcurrentUnits ?? 64;
  const onCallDone = options.onCallDone;
  if (!(maxConcurrent >= 1 && maxUnits >= 1 && maxEvents >= 1 && minConcurrent >= 1)) throw new RangeError('appender limits must be at least 1');

  /** Entries from `head` on are waiting; those before it were taken (and are cleared, so their events can be collected). */
  let queue: (Entry | undefined)[] = [];
  let head = 0;
  /** Streams of calls in flight. */
  const busy = new Set<string>();
  let running = 0;
  let inFlight = 0;
  let failure: unknown = null;
  let scheduled = false;
  let waiters: { n: number; resolve: () => void }[] = [];
  const stats = { calls: 0, units: 0, largestBatch: 0 };

  function settle(count: number): void {
    inFlight -= count;
    if (waiters.length === 0) return;
    const ready = waiters.filter((w) => inFlight < w.n);
    if (ready.length === 0) return;
    waiters = waiters.filter((w) => inFlight >= w.n);
    for (const w of ready) w.resolve();
  }

  function blocked(streams: readonly string[]): EventAssemblerError {
    return new EventAssemblerError('PIPELINE_APPEND_BLOCKED', 'not appended: an earlier append failed', { streams: [...streams] });
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    // After the current turn: units handed over in the same turn travel together.
    setImmediate(pump);
  }

  function pump(): void {
    scheduled = false;
    while (running < maxConcurrent && head < queue.length && failure === null) {
      const take: Entry[] = [];
      let events = 0;
      /** The call is as large as a call may be: the unit or the event limit stopped it. */
      let full = false;
      for (let at = head; at < queue.length && take.length < maxUnits; at++) {
        const entry = queue[at]!;
        if (take.length > 0 && events + entry.batch.events.length > maxEvents) {
          full = true;
          break;
        }
        if (entry.streams.some((s) => busy.has(s))) break;
        take.push(entry);
        events += entry.batch.events.length;
      }
      if (take.length === maxUnits || events >= maxEvents) full = true;
      // While a call is in flight a small batch waits for it to end (see the header).
      if (take.length === 0 || (running > 0 && !full && take.length < minConcurrent)) break;
      for (let i = 0; i < take.length; i++) queue[head + i] = undefined;
      head += take.length;
      if (head > 1024 && head * 2 > queue.length) {
        queue = queue.slice(head);
        head = 0;
      }
      dispatch(take);
    }
  }

  function dispatch(take: Entry[]): void {
    const streams = new Set<string>();
    for (const entry of take) for (const s of entry.streams) streams.add(s);
    for (const s of streams) busy.add(s);
    running += 1;
    const startedAt = onCallDone ? performance.now() : 0;
    const batches = take.map((entry) => entry.batch);
    const call: Promise<AppendOutcome[]> = sink.appendMany ? sink.appendMany(batches) : Promise.all(batches.map((batch) => sink.append(batch)));
    void call.then(
      (outcomes) => {
        stats.calls += 1;
        stats.units += take.length;
        if (take.length > stats.largestBatch) stats.largestBatch = take.length;
        for (let i = 0; i < take.length; i++) take[i]!.receiver.appended(outcomes[i]!);
      },
      (error: unknown) => {
        failure ??= error;
        for (const entry of take) entry.receiver.failed(error);
        // Nothing queued behind a failed call may run.
        const rest = queue.slice(head) as Entry[];
        queue = [];
        head = 0;
        for (const entry of rest) entry.receiver.failed(blocked(entry.streams));
        settle(rest.length);
      },
    ).finally(() => {
      onCallDone?.((performance.now() - startedAt) / 1000);
      for (const s of streams) busy.delete(s);
      running -= 1;
      settle(take.length);
      if (head < queue.length) schedule();
    });
  }

  function whenBelow(n: number): Promise<void> {
    if (inFlight < n) return Promise.resolve();
    return new Promise((resolve) => waiters.push({ n, resolve }));
  }

  function appendTo(given: SinkBatch, receiver: AppendReceiver): void {
    const events = given.events;
    const streams = events.length === 1 ? [events[0]!.stream] : [...new Set(events.map((e) => e.stream))];
    if (failure !== null) {
      // Told later, as a rejected promise would be: the caller is still queueing.
      queueMicrotask(() => receiver.failed(blocked(streams)));
      return;
    }
    inFlight += 1;
    sink.prefetch?.(streams);
    // What waits in the queue is what the sink made of the unit (encoded), not the mapper's objects.
    const batch = sink.prepare ? sink.prepare(given) : given;
    queue.push({ batch, streams, receiver });
    schedule();
  }

  return {
    append(batch) {
      return new Promise<AppendOutcome>((resolve, reject) => appendTo(batch, { appended: resolve, failed: reject }));
    },
    appendTo,
    get inFlight() {
      return inFlight;
    },
    drain: () => whenBelow(1),
    whenBelow,
    get stats() {
      return { ...stats };
    },
  };
}
