// The tests' stall-aware wait (test/resilience/assembler-process.ts): it waits as long as the
// measure moves, fails once it stands still for `stallMs`, and is bounded by `capMs`.
import { describe, expect, it } from 'vitest';
import { waitWhileProgressing } from '../resilience/assembler-process.js';

describe('waitWhileProgressing', () => {
  it('outlasts the stall limit while the measure keeps moving, and gives the awaited value', async () => {
    const started = Date.now();
    const value = await waitWhileProgressing('the count to pass 300 ms', () => {
      const elapsed = Date.now() - started;
      return { progress: Math.floor(elapsed / 10), done: elapsed >= 300 && `after ${elapsed} ms` };
    }, { stallMs: 100, capMs: 5_000, intervalMs: 5 });
    expect(value).toMatch(/^after \d+ ms$/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
  });

  it('fails once the measure stands still for stallMs, with what `stuck` adds', async () => {
    const started = Date.now();
    await expect(
      waitWhileProgressing('something that never comes', () => ({ progress: 7, done: false }), { stallMs: 100, capMs: 5_000, intervalMs: 5, stuck: (p) => `the measure stayed at ${p}` }),
    ).rejects.toThrow('stuck: something that never comes, but the measure stayed at 7 for 0.1 s');
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it('fails at capMs even while the measure moves', async () => {
    let n = 0;
    await expect(waitWhileProgressing('a moving target', () => ({ progress: n++, done: false }), { stallMs: 1_000, capMs: 150, intervalMs: 5 })).rejects.toThrow(
      'timed out after 150 ms waiting for a moving target',
    );
  });
});
