/**
 * A queued unit until it is durable, without a promise per unit.
 *
 * A streamed transaction used to wait through three promises (the appender's, the counting, the
 * acknowledgement), with their resolving functions, callbacks and scopes: about fourteen objects
 * that lived as long as the unit was in flight — and every young collection copied those of the
 * few thousand units in flight (promoted them, once they outlived one). Here the appender tells
 * the unit ({@link AppendReceiver}), the unit counts and tells its one listener: two objects.
 * A caller that wants a promise still gets one (`durable`, made when asked).
 */
import type { AppendOutcome } from '../sink/index.js';
import type { AppendReceiver } from './appender.js';

/** Counts a durable unit's outcome (one per transaction handler). */
export interface UnitCounter {
  count(outcome: AppendOutcome, types: string | readonly string[], parked: boolean): void;
}

const PENDING = 0;
const APPENDED = 1;
const FAILED = 2;

export class PendingUnit implements AppendReceiver {
  #state: typeof PENDING | typeof APPENDED | typeof FAILED = PENDING;
  #value: unknown = undefined;
  #listener: AppendReceiver | null = null;
  #promise: Promise<AppendOutcome> | null = null;
  #resolvers: { resolve(outcome: AppendOutcome): void; reject(error: unknown): void } | null = null;

  constructor(
    private readonly counter: UnitCounter,
    /** The event types (one, or several), for the counts by type. */
    private readonly types: string | readonly string[],
    /** Whether the unit carries failed records (counted as a parked transaction). */
    private readonly parked: boolean,
  ) {}

  appended(outcome: AppendOutcome): void {
    if (this.#state !== PENDING) return;
    this.counter.count(outcome, this.types, this.parked);
    this.#settle(APPENDED, outcome);
  }

  failed(error: unknown): void {
    if (this.#state !== PENDING) return;
    this.#settle(FAILED, error);
  }

  #settle(state: typeof APPENDED | typeof FAILED, value: unknown): void {
    this.#state = state;
    this.#value = value;
    const listener = this.#listener;
    this.#listener = null;
    if (listener) tell(listener, state, value);
    const resolvers = this.#resolvers;
    this.#resolvers = null;
    if (resolvers) {
      if (state === APPENDED) resolvers.resolve(value as AppendOutcome);
      else resolvers.reject(value);
    }
  }

  /** Tells `receiver` how the unit ended (one listener; later, never now, when it has ended already). */
  listen(receiver: AppendReceiver): void {
    if (this.#listener !== null) throw new Error('a pending unit has one listener');
    if (this.#state === PENDING) {
      this.#listener = receiver;
      return;
    }
    const state = this.#state;
    const value = this.#value;
    queueMicrotask(() => tell(receiver, state, value));
  }

  /** Resolves with the outcome once durable; rejects with the append's error. */
  get durable(): Promise<AppendOutcome> {
    if (this.#promise) return this.#promise;
    if (this.#state === APPENDED) return (this.#promise = Promise.resolve(this.#value as AppendOutcome));
    if (this.#state === FAILED) return (this.#promise = Promise.reject(this.#value));
    return (this.#promise = new Promise<AppendOutcome>((resolve, reject) => (this.#resolvers = { resolve, reject })));
  }
}

function tell(receiver: AppendReceiver, state: typeof APPENDED | typeof FAILED, value: unknown): void {
  if (state === APPENDED) receiver.appended(value as AppendOutcome);
  else receiver.failed(value);
}
