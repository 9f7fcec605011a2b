// The sink's stream-state LRU (src/sink/state-cache.ts): full to its capacity, least recently used out first.
import { describe, expect, it } from 'vitest';
import { createLru } from '../../src/sink/state-cache.js';

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
    // Least recently used first: s-0 was used after s-148 was set.
    const keys = [...lru.entries()].map(([k]) => k);
    expect(keys.indexOf('s-0')).toBeGreaterThan(keys.indexOf('s-148'));
    expect(keys[keys.length - 1]).toBe('s-149');
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
    lru.set('e', 6); // full: the least recently used (c) goes
    expect([lru.has('c'), lru.has('a'), lru.has('d'), lru.has('e'), evicted]).toEqual([false, true, true, true, 1]);
    lru.clear();
    expect(lru.size).toBe(0);
  });
});
