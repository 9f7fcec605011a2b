// The transport: a catch-up subscription to `$all`, filtered on the server by stream prefix
// (categories) or event type, then on this side by exact category, type and partition. Events
// queue here while a batch applies; the subscription is paused when the queue is full.
import { eventTypeFilter, START, streamNameFilter, type AllStreamResolvedEvent, type AllStreamSubscription, type KurrentDBClient } from '@kurrent/kurrentdb-client';
import { selects } from './define-projection.js';
import { partitionOf } from './partition.js';
import { recordedInput, toProjectionEvent } from './projection-event.js';
import type { AllPosition, Projection, ProjectionEvent } from './types.js';

export interface EventFeed {
  /** Waits for at least one event, then takes up to `max`; `null` once the feed is closed or failed (see `error`). */
  next(max: number): Promise<ProjectionEvent[] | null>;
  /** Whether the subscription reached the head of `$all` at least once. */
  readonly caughtUp: boolean;
  /** Why the feed ended, when the subscription failed. */
  readonly error: Error | null;
  /** Ends the subscription; a waiting `next` resolves `null`. */
  close(): Promise<void>;
}

export function filterOf(projection: Projection<any>) {
  // The server filters on one field: stream prefixes when categories are given, else event types.
  if (projection.categories.length > 0) return streamNameFilter({ prefixes: projection.categories.map((c) => `${c}-`) });
  return eventTypeFilter({ prefixes: [...projection.types] });
}

/** Subscribes after `from` (exclusive; from the start when `null`). */
export function openEventFeed(client: KurrentDBClient, projection: Projection<any>, from: AllPosition | null): EventFeed {
  const highWater = Math.max(2 * projection.batchSize, 256);
  const queue: ProjectionEvent[] = [];
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
    filter: filterOf(projection),
  });
  subscription.on('data', (resolved: AllStreamResolvedEvent) => {
    const input = recordedInput(resolved);
    if (!input || !selects(projection, input.stream, input.type, partitionOf(input.stream, projection.partition.count))) return;
    queue.push(toProjectionEvent(input));
    if (queue.length >= highWater && !subscription.isPaused()) subscription.pause();
    wake();
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
      while (queue.length === 0 && !closed && !error) await new Promise<void>((resolve) => (waiter = resolve));
      if (closed || (queue.length === 0 && error)) return null;
      const batch = queue.splice(0, max);
      if (queue.length < highWater / 2 && subscription.isPaused()) subscription.resume();
      return batch;
    },
    get caughtUp() {
      return caughtUp;
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
