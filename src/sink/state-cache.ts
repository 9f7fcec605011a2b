// The stream-state cache's two building blocks: a least-recently-used map and a concurrency limiter.

/**
 * Stream states, the least recently used forgotten, `capacity` of them kept: two generations in
 * order of use — what is used moves to the end of the young one; once the cache is full each new
 * stream evicts the least recently used of the old generation (through one iterator kept over
 * it), and when the old one is empty the young one becomes old. Every operation is O(1). (A single Map in LRU order — delete the first
 * key on each insert — gets slower with every eviction: V8 keeps deleted entries as holes that a
 * new iterator from the front must skip until the table is rebuilt; a bulk insert of 1,000,000
 * new streams through a 100,000-entry cache ran at a third of the speed of 150,000. The kept
 * iterator skips each hole once. Dropping the old generation whole, as before, left the cache
 * between half full and full — and a stop carried only what it held.)
 */
export function createLru<S>(capacity: number, onEvict: () => void) {
  const limit = Math.max(1, capacity);
  let young = new Map<string, S>();
  let old = new Map<string, S>();
  let oldest = old.keys();
  function evictOne(): void {
    if (old.size === 0) {
      old = young;
      young = new Map();
      oldest = old.keys();
    }
    const next = oldest.next();
    if (next.done) return;
    old.delete(next.value);
    onEvict();
  }
  function put(stream: string, state: S): void {
    // Last in the young generation's order, whether it was there or not.
    if (!young.delete(stream) && young.size + old.size >= limit) evictOne();
    young.set(stream, state);
  }
  return {
    get(stream: string): S | undefined {
      const state = young.get(stream);
      if (state !== undefined) {
        young.delete(stream);
        young.set(stream, state);
        return state;
      }
      const aged = old.get(stream);
      if (aged !== undefined) {
        old.delete(stream);
        put(stream, aged);
      }
      return aged;
    },
    /** Whether `stream` is cached, without touching its recency. */
    has(stream: string): boolean {
      return young.has(stream) || old.has(stream);
    },
    set(stream: string, state: S): void {
      old.delete(stream);
      put(stream, state);
    },
    delete(stream: string): boolean {
      return young.delete(stream) || old.delete(stream);
    },
    clear(): void {
      young.clear();
      old.clear();
    },
    get size(): number {
      return young.size + old.size;
    },
    /** Every entry, least recently used first. */
    *entries(): Generator<[string, S]> {
      yield* old;
      yield* young;
    },
  };
}

/** At most `limit` of the tasks run at once; waiting `later` tasks (look-ahead reads) start after every other waiting one. */
export function createLimiter(limit: number) {
  let running = 0;
  const waiting: (() => void)[] = [];
  const waitingLater: (() => void)[] = [];
  return async function run<T>(task: () => Promise<T>, later = false): Promise<T> {
    if (running >= limit) await new Promise<void>((resolve) => (later ? waitingLater : waiting).push(resolve));
    running += 1;
    try {
      return await task();
    } finally {
      running -= 1;
      (waiting.shift() ?? waitingLater.shift())?.();
    }
  };
}
