// The read-key set of a resumed initial snapshot stays bounded in memory: beyond its limit a
// table's keys go to disk (sorted runs, a sparse index and a Bloom filter in memory), and
// membership stays exact either way.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createReadKeySet } from '../../src/source/snapshot/index.js';
import { keyString } from '../../src/source/snapshot/index.js';

const dir = mkdtempSync(join(tmpdir(), 'ea-read-keys-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const key = (id: number | bigint | string) => keyString(['id'], { id });

describe('createReadKeySet', () => {
  it('holds at most maxInMemory keys in memory; spilled keys are still found, absent ones are not', () => {
    const set = createReadKeySet({ maxInMemory: 1_000, spillDir: dir });
    for (let i = 0; i < 25_000; i += 2) set.add('public.a', key(i));
    for (let i = 0; i < 300; i++) set.add('public.b', key(`k\n${i}`)); // a raw newline in a key value is JSON-escaped
    expect(set.sizes.memory).toBeLessThanOrEqual(1_000);
    expect(set.sizes.memory + set.sizes.spilled).toBe(12_500 + 300);
    let found = 0;
    let falsePositives = 0;
    for (let i = 0; i < 25_000; i++) {
      const has = set.has('public.a', key(i));
      if (i % 2 === 0 && has) found += 1;
      if (i % 2 === 1 && has) falsePositives += 1;
    }
    expect(found).toBe(12_500);
    expect(falsePositives).toBe(0);
    expect(set.has('public.b', key('k\n7'))).toBe(true);
    expect(set.has('public.b', key(7))).toBe(false);
    expect(set.has('public.a', key(7n))).toBe(false); // bigint keys are their own strings
    expect(readdirSync(dir).length).toBe(1);
    set.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('forgets a finished table (files included) and a key in memory', () => {
    const set = createReadKeySet({ maxInMemory: 10, spillDir: dir });
    for (let i = 0; i < 50; i++) set.add('public.a', key(i));
    set.add('public.b', key(1));
    set.delete('public.b', key(1));
    expect(set.has('public.b', key(1))).toBe(false);
    expect(set.has('public.a', key(42))).toBe(true);
    set.dropTable('public.a');
    expect(set.has('public.a', key(42))).toBe(false);
    expect(set.sizes).toEqual({ memory: 0, spilled: 0 });
    set.close();
  });
});
