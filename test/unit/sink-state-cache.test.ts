// The sink's stream-state cache (src/sink/state-cache.ts): full to its capacity, a segmented LRU —
// streams used once leave before streams used again, so a bulk pass does not flush the rest.
import { describe, expect, it } from 'vitest';
import { createLru, PASSING_SHARE } from '../../src/sink/state-cache.js';

describe('createLru', () => {
  it('holds exactly its capacity once full, evicting one stream per new one and saying so', () => {
    let evicted = 0;
    const lru = createLru<number>(1_000, () => (evicted += 1));
    for (let i = 0; i < 10_000; i++) {
      lru.set(`s-${i}`, i);
      expect(lru.size).toBe(Math.min(i + 1, 1_000));
    }
    expect(evicted).toBe(9_000);
    // The last 1,000 are the ones kept.
    expect([...lru.entries()].map(([k]) => k)).toEqual(Array.from({ length: 1_000 }, (_, i) => `s-${9_000 + i}`));
  });

  it('keeps what is used: a stream read again outlives streams set after it but not used since', () => {
    const lru = createLru<number>(100, () => undefined);
    for (let i = 0; i < 100; i++) lru.set(`s-${i}`, i);
    for (let i = 100; i < 150; i++) {
      expect(lru.get('s-0')).toBe(0); // used all along
      lru.set(`s-${i}`, i);
    }
    expect(lru.has('s-0')).toBe(true);
    expect(lru.has('s-1')).toBe(false); // the oldest untouched went first
    expect(lru.has('s-51')).toBe(true);
    expect(lru.size).toBe(100);
    // The first to be evicted first: the streams set once (s-51 … s-149, oldest first), then s-0.
    const keys = [...lru.entries()].map(([k]) => k);
    expect(keys).toEqual([...Array.from({ length: 99 }, (_, i) => `s-${51 + i}`), 's-0']);
  });

  it('a pass over more streams than it holds, each set once, leaves the streams used again in place', () => {
    let evicted = 0;
    const lru = createLru<number>(1_000, () => (evicted += 1));
    for (let i = 0; i < 700; i++) lru.set(`used-${i}`, i);
    for (let i = 0; i < 700; i++) expect(lru.get(`used-${i}`)).toBe(i); // used again: protected
    for (let i = 0; i < 10_000; i++) lru.set(`once-${i}`, i);
    expect(lru.size).toBe(1_000);
    expect(evicted).toBe(9_700);
    for (let i = 0; i < 700; i++) expect(lru.has(`used-${i}`)).toBe(true);
    // The rest of the capacity holds the newest of the pass.
    expect(lru.has('once-9699')).toBe(false);
    expect(lru.has('once-9700')).toBe(true);
  });

  it('the protected segment holds at most 80 % of the capacity; its least recently used go back to probation, then out', () => {
    const lru = createLru<number>(100, () => undefined);
    for (let i = 0; i < 100; i++) lru.set(`s-${i}`, i);
    for (let i = 0; i < 100; i++) lru.get(`s-${i}`); // all used again: s-0 … s-19 were handed back
    for (let i = 0; i < 20; i++) lru.set(`new-${i}`, i);
    expect(Array.from({ length: 100 }, (_, i) => lru.has(`s-${i}`))).toEqual(Array.from({ length: 100 }, (_, i) => i >= 20));
  });

  it('repeated passes in the same order over 120 % of the capacity, starting from carried states: about a third miss, not all (plain LRU: all)', () => {
    const capacity = 1_000;
    const streams = Array.from({ length: 1_200 }, (_, i) => `order-${i}`);
    const lru = createLru<number>(capacity, () => undefined);
    // As a restart adopts what the last process carried: the last 1,000 of the previous pass.
    for (const stream of streams.slice(200)) lru.setUsed(stream, 0);
    const misses: number[] = [];
    for (let pass = 1; pass <= 3; pass++) {
      let missed = 0;
      for (const stream of streams) {
        if (lru.get(stream) === undefined) missed += 1;
        lru.set(stream, pass); // what the append taught
      }
      misses.push(missed);
    }
    // Probation (200) churns with the 400 streams outside the protected 800; those 800 hit.
    expect(misses).toEqual([400, 400, 400]);
  });

  it('setting a cached stream or deleting one evicts nothing; get of an unknown one gives undefined', () => {
    let evicted = 0;
    const lru = createLru<number>(3, () => (evicted += 1));
    lru.set('a', 1);
    lru.set('b', 2);
    lru.set('c', 3);
    lru.set('a', 4);
    expect([lru.size, evicted, lru.get('a')]).toEqual([3, 0, 4]);
    expect(lru.delete('b')).toBe(true);
    lru.set('d', 5);
    expect([lru.size, evicted]).toEqual([3, 0]);
    expect(lru.get('zz')).toBeUndefined();
    lru.set('e', 6); // full: the least recently used of those set once (c; a was used again) goes
    expect([lru.has('c'), lru.has('a'), lru.has('d'), lru.has('e'), evicted]).toEqual([false, true, true, true, 1]);
    lru.clear();
    expect(lru.size).toBe(0);
  });

  it('a snapshot pass (set passing) keeps at most 2 % of the capacity and evicts nothing else, however long', () => {
    let evicted = 0;
    const lru = createLru<number>(1_000, () => (evicted += 1));
    for (let i = 0; i < 300; i++) lru.set(`used-${i}`, i);
    for (let i = 0; i < 300; i++) lru.get(`used-${i}`); // protected
    for (let i = 0; i < 400; i++) lru.set(`once-${i}`, i); // probation
    for (let i = 0; i < 100_000; i++) lru.set(`row-${i}`, i, 'passing');
    expect(PASSING_SHARE).toBe(0.02);
    expect(lru.size).toBe(720);
    expect(evicted).toBe(100_000 - 20);
    for (let i = 0; i < 300; i++) expect(lru.has(`used-${i}`)).toBe(true);
    for (let i = 0; i < 400; i++) expect(lru.has(`once-${i}`)).toBe(true);
    // The newest 20 of the pass, first to be evicted first, ahead of probation and protected.
    const keys = [...lru.entries()].map(([k]) => k);
    expect(keys.slice(0, 20)).toEqual(Array.from({ length: 20 }, (_, i) => `row-${99_980 + i}`));
    expect(keys[20]).toBe('once-0');
  });

  it('a pass keeps its share and, in a full cache, makes room from the pass first; a passing stream used again is protected, and one set once moves over', () => {
    const lru = createLru<number>(10, () => undefined, 0.2);
    for (let i = 0; i < 5; i++) lru.set(`s-${i}`, i);
    lru.set('row-a', 0, 'passing');
    lru.set('row-b', 0, 'passing');
    lru.set('row-c', 0, 'passing'); // over the pass's share (2): its own oldest goes
    expect([lru.has('row-a'), lru.has('row-b'), lru.has('row-c'), lru.size]).toEqual([false, true, true, 7]);
    for (let i = 5; i < 8; i++) lru.set(`s-${i}`, i); // full
    lru.set('row-d', 0, 'passing'); // full: the pass's oldest goes, not s-0
    expect([lru.has('row-b'), lru.has('s-0'), lru.size]).toEqual([false, true, 10]);
    expect(lru.get('row-c')).toBe(0); // used again: protected, out of the pass's share
    lru.set('s-0', 7, 'passing'); // set once, then touched by the pass: counts in the pass
    lru.set('row-e', 0, 'passing');
    expect([lru.has('row-d'), lru.has('row-c'), lru.has('s-0'), lru.has('row-e'), lru.size]).toEqual([false, true, true, true, 10]);
    lru.set('s-0', 8); // touched once more, not by the pass: back in probation
    expect([...lru.entries()].map(([k]) => k)).toEqual(['row-e', 's-1', 's-2', 's-3', 's-4', 's-5', 's-6', 's-7', 's-0', 'row-c']);
    lru.setUsed('row-e', 1); // a carried state: protected wherever it was
    expect([...lru.entries()].map(([k]) => k).slice(-2)).toEqual(['row-c', 'row-e']);
    expect(lru.get('s-0')).toBe(8);
  });

  it('under random sets, uses, carried states, deletes and passes: has, size, entries, get and evictions agree', () => {
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let evicted = 0;
    const lru = createLru<number>(50, () => (evicted += 1), 0.1);
    const values = new Map<string, number>(); // what each stream was last set to (while it may be cached)
    let added = 0;
    let deleted = 0;
    for (let step = 0; step < 20_000; step++) {
      const stream = `s-${random(120)}`;
      const op = random(6);
      const before = lru.has(stream);
      if (op === 0 || op === 1) lru.set(stream, step);
      else if (op === 2) lru.set(stream, step, 'passing');
      else if (op === 3) lru.setUsed(stream, step);
      else if (op === 4) expect(lru.get(stream)).toBe(before ? values.get(stream) : undefined);
      else if (lru.delete(stream)) deleted += 1;
      if (op <= 3) {
        values.set(stream, step);
        if (!before) added += 1;
        expect(lru.has(stream)).toBe(true);
      }
      if (op === 5) expect(lru.has(stream)).toBe(false);
      const keys = [...lru.entries()].map(([k]) => k);
      expect(new Set(keys).size).toBe(keys.length);
      expect(lru.size).toBe(keys.length);
      expect(lru.size).toBeLessThanOrEqual(50);
      expect(added - deleted - evicted).toBe(lru.size);
      if (step % 500 === 0) for (let i = 0; i < 120; i++) expect(lru.has(`s-${i}`)).toBe(keys.includes(`s-${i}`));
    }
    for (const [stream, state] of lru.entries()) expect(state).toBe(values.get(stream));
  });
});
