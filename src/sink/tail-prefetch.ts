/**
 * Look-ahead tail reads: the states of streams that units queued for the sink will touch, read
 * before their append call asks for them (stream-states.ts decides which streams need a read and
 * when to look ahead; the pipeline's appender hands over what it queues).
 *
 * A prefetched state is a hint, never more: it is held apart from the stream-state cache (so a
 * look-ahead never evicts what an append needs), taken once by the call that needs it, and
 * forgotten whenever the stream's state is set or dropped by anything else (an append of ours
 * landed, a failure, a re-read) — a read that started before such a change may have seen the
 * stream either side of it. A state taken is still only an expectation: the append names it as
 * the expected revision, and a stream that moved meanwhile fails that append and goes through
 * the usual conflict handling (receipt, then another writer or our own earlier write).
 *
 * Bounded: at most `capacity` streams prefetched or being read; beyond that, nothing more is
 * started until calls take what is there. A read that fails is forgotten (the call reads again,
 * waiting out outages as every read does).
 */

export interface TailPrefetch<S> {
  /** Starts a read of each of `streams` not prefetched yet, while there is room; gives how many started. */
  start(streams: Iterable<string>): number;
  /**
   * Takes the prefetched state of `stream`: the state, a promise of it while the read is in flight
   * (`null` once that read failed or the stream's state changed meanwhile), or `undefined` when
   * none was prefetched.
   */
  take(stream: string): S | Promise<S | null> | undefined;
  /** Forgets `stream`'s prefetched state, read or in flight (its state was set or dropped elsewhere). */
  invalidate(stream: string): void;
  has(stream: string): boolean;
  clear(): void;
  /** Streams prefetched or being read. */
  readonly size: number;
}

export interface TailPrefetchOptions<S> {
  readonly capacity: number;
  /** One read, once (no retries: a failed look-ahead costs the call its own read, nothing more). */
  read(stream: string): Promise<S>;
  /** Told each state read (still valid when it arrived). */
  onRead?(state: S): void;
}

interface Entry<S> {
  state: S | undefined;
  valid: boolean;
  readonly promise: Promise<S | null>;
}

export function createTailPrefetch<S>(options: TailPrefetchOptions<S>): TailPrefetch<S> {
  const entries = new Map<string, Entry<S>>();

  function begin(stream: string): void {
    const entry: Entry<S> = {
      state: undefined,
      valid: true,
      promise: options.read(stream).then(
        (state) => {
          if (!entry.valid) return null;
          entry.state = state;
          options.onRead?.(state);
          return state;
        },
        () => {
          entry.valid = false;
          if (entries.get(stream) === entry) entries.delete(stream);
          return null;
        },
      ),
    };
    entries.set(stream, entry);
  }

  return {
    start(streams) {
      let started = 0;
      for (const stream of streams) {
        if (entries.size >= options.capacity) break;
        if (entries.has(stream)) continue;
        begin(stream);
        started += 1;
      }
      return started;
    },
    take(stream) {
      const entry = entries.get(stream);
      if (!entry) return undefined;
      if (entry.state !== undefined) {
        entries.delete(stream);
        return entry.state;
      }
      // In flight: it stays invalidatable until it arrives.
      return entry.promise.then((state) => {
        if (entries.get(stream) === entry) entries.delete(stream);
        return entry.valid ? state : null;
      });
    },
    invalidate(stream) {
      const entry = entries.get(stream);
      if (!entry) return;
      entry.valid = false;
      entries.delete(stream);
    },
    has: (stream) => entries.has(stream),
    clear() {
      for (const entry of entries.values()) entry.valid = false;
      entries.clear();
    },
    get size() {
      return entries.size;
    },
  };
}
