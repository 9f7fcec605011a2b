// The transport: a catch-up subscription to `$all`, filtered on the server by stream prefix
// (categories) or event type, then on this side by exact category, type and partition. Events
// queue here while a batch applies; the subscription is paused when the queue is full.
//
// In the transaction-atomic mode (`atomic: 'transaction'`) the subscription reads every event but
// system events — a unit's completeness is counted across all its streams — and batches are cut
// only at clean cuts (unit-queue.ts).
import { BACKWARDS, eventTypeFilter, excludeSystemEvents, START, streamNameFilter, type AllStreamResolvedEvent, type AllStreamSubscription, type KurrentDBClient } from '@kurrent/kurrentdb-client';
import { selects } from './define-projection.js';
import { partitionOf } from './partition.js';
import { recordedInput, toProjectionEvent } from './projection-event.js';
import { atOrBelow } from './store.js';
import { createUnitQueue, unitOf, type FeedBatch, type UnitQueue } from './unit-queue.js';
import type { AllPosition, Projection, ProjectionEvent, ProjectionLogger } from './types.js';

export type { FeedBatch } from './unit-queue.js';

export interface EventFeed {
  /** Waits for a batch (at least one event; atomic mode: a clean cut), then takes up to `max` selected events; `null` once the feed is closed or failed (see `error`). */
  next(max: number): Promise<FeedBatch | null>;
  /** Whether the subscription reached the head of `$all` at least once. */
  readonly caughtUp: boolean;
  /** Events received and not yet taken (atomic mode: selected or not). */
  readonly queued: number;
  /** Atomic mode: source transactions begun and not complete (their events are held). */
  readonly openTransactions: number;
  /** Why the feed ended, when the subscription failed. */
  readonly error: Error | null;
  /** Ends the subscription; a waiting `next` resolves `null`. */
  close(): Promise<void>;
}

/** The server-side filter of the projection's selection (reads: rebuilds, status). */
export function filterOf(projection: Projection<any>) {
  // The server filters on one field: stream prefixes when categories are given, else event types.
  if (projection.categories.length > 0) return streamNameFilter({ prefixes: projection.categories.map((c) => `${c}-`) });
  return eventTypeFilter({ prefixes: [...projection.types] });
}

/** The batched mode's queue: selected events only, any prefix is a batch. */
function eventQueue(projection: Projection<any>): UnitQueue {
  const queue: ProjectionEvent[] = [];
  return {
    push(input) {
      if (selects(projection, input.stream, input.type, partitionOf(input.stream, projection.partition.count))) queue.push(toProjectionEvent(input));
    },
    take(max) {
      if (queue.length === 0) return null;
      const events = queue.splice(0, max);
      return { events, through: events.at(-1)!.position };
    },
    get size() {
      return queue.length;
    },
    get ready() {
      return queue.length > 0;
    },
    open: () => new Map(),
  };
}

/** Events read backwards from a checkpoint, at most, to count the units that may continue after it. */
export const CARRY_WINDOW = 10_000;

/**
 * Events per unit at or before `from`, read backwards over at most `window` events: what the
 * atomic mode's queue carries for units that a checkpoint of the batched mode may have cut.
 * Units complete within the window are left out.
 */
export async function carriedUnits(client: KurrentDBClient, from: AllPosition | null, window = CARRY_WINDOW): Promise<Map<string, number>> {
  const counts = new Map<string, { seen: number; count: number }>();
  if (from === null) return new Map();
  const at = { commit: from.commit, prepare: from.prepare };
  // A backward read from a position returns the events before it; the event at it comes from a forward read.
  const reads = [client.readAll({ fromPosition: at, maxCount: 1, filter: excludeSystemEvents() }), client.readAll({ direction: BACKWARDS, fromPosition: at, maxCount: window, filter: excludeSystemEvents() })];
  for (const read of reads) {
    for await (const resolved of read) {
      const input = recordedInput(resolved);
      if (!input || !atOrBelow(input.position, from)) continue;
      const unit = unitOf(input.metadata);
      if (!unit) continue;
      const state = counts.get(unit.key) ?? { seen: 0, count: unit.count };
      state.seen++;
      counts.set(unit.key, state);
    }
  }
  const carried = new Map<string, number>();
  for (const [key, { seen, count }] of counts) if (seen < count) carried.set(key, seen);
  return carried;
}

/** How long a batch waits on a source transaction still arriving before a warning says which (and again as long as it waits). */
export const OPEN_TRANSACTION_WARN_MS = 30_000;

export interface FeedOptions {
  /** See `carriedUnits` (atomic mode). */
  readonly carried?: ReadonlyMap<string, number>;
  readonly logger?: ProjectionLogger;
  /** @default OPEN_TRANSACTION_WARN_MS */
  readonly warnAfterMs?: number;
}

/** Subscribes after `from` (exclusive; from the start when `null`). */
export function openEventFeed(client: KurrentDBClient, projection: Projection<any>, from: AllPosition | null, options: FeedOptions = {}): EventFeed {
  const highWater = Math.max(2 * projection.batchSize, 256);
  const queue = projection.atomic === 'transaction' ? createUnitQueue(projection, options.carried) : eventQueue(projection);
  const warnAfterMs = options.warnAfterMs ?? OPEN_TRANSACTION_WARN_MS;
  let waiter: (() => void) | null = null;
  let closed = false;
  let caughtUp = false;
  let error: Error | null = null;
  const wake = () => {
    const w = waiter;
    waiter = null;
    w?.();
  };
  const subscription: AllStreamSubscription = client.subscribeToAll({
    fromPosition: from === null ? START : { commit: from.commit, prepare: from.prepare },
    filter: projection.atomic === 'transaction' ? excludeSystemEvents() : filterOf(projection),
  });
  subscription.on('data', (resolved: AllStreamResolvedEvent) => {
    const input = recordedInput(resolved);
    if (!input) return;
    queue.push(input);
    // Paused only with a batch to take: a unit still arriving is read on, however large.
    if (queue.size >= highWater && queue.ready && !subscription.isPaused()) subscription.pause();
    if (queue.ready) wake();
  });
  subscription.on('caughtUp', () => {
    caughtUp = true;
  });
  subscription.on('error', (failure: Error) => {
    if (!closed) error = failure;
    wake();
  });
  subscription.on('end', () => {
    if (!closed && !error) error = new Error('the $all subscription ended');
    wake();
  });

  return {
    async next(max) {
      let waited = 0;
      while (!queue.ready && !closed && !error) {
        let timer: NodeJS.Timeout | undefined;
        const woke = await new Promise<boolean>((resolve) => {
          waiter = () => resolve(true);
          timer = setTimeout(() => resolve(false), warnAfterMs);
        });
        clearTimeout(timer);
        if (woke) continue;
        waiter = null;
        waited += warnAfterMs;
        const [unit, state] = [...queue.open()][0] ?? [];
        if (unit === undefined) continue; // idle: nothing is held
        options.logger?.warn('projection waits for the rest of a source transaction', { projection: projection.name, partition: `${projection.partition.index}/${projection.partition.count}`, transaction: unit, seen: state?.seen, count: state?.count, heldEvents: queue.size, waitedMs: waited });
      }
      if (closed || !queue.ready) return null;
      const batch = queue.take(max);
      if (subscription.isPaused() && (queue.size < highWater / 2 || !queue.ready)) subscription.resume();
      return batch;
    },
    get caughtUp() {
      return caughtUp;
    },
    get queued() {
      return queue.size;
    },
    get openTransactions() {
      return queue.open().size;
    },
    get error() {
      return error;
    },
    async close() {
      if (closed) return;
      closed = true;
      wake();
      await subscription.unsubscribe().catch(() => undefined);
    },
  };
}
