// The checkpoint coordinator: only the contiguous durable prefix is acknowledgeable.
import { describe, expect, it } from 'vitest';
import { createCheckpointCoordinator } from '../../src/pipeline/checkpoint-coordinator.js';

describe('checkpoint coordinator', () => {
  it('acknowledges nothing before the first transaction is durable', () => {
    const c = createCheckpointCoordinator<string>();
    c.received('0/10', 'a');
    c.received('0/20', 'b');
    expect(c.acknowledgeable).toBeNull();
    expect(c.pending).toBe(2);
  });

  it('advances only over the contiguous completed prefix, whatever the completion order', () => {
    const c = createCheckpointCoordinator<string>();
    const a = c.received('0/10', 'a');
    const b = c.received('0/20', 'b');
    const d = c.received('0/30', 'd');
    expect(c.complete(b)).toBeNull(); // b is durable, a is not: nothing may be acknowledged
    expect(c.complete(d)).toBeNull();
    expect(c.acknowledgeable).toBeNull();
    expect(c.complete(a)).toEqual({ seq: d, endLsn: '0/30', payload: 'd' }); // a closes the gap: everything up to d
    expect(c.pending).toBe(0);
  });

  it('moves step by step when completions arrive in order', () => {
    const c = createCheckpointCoordinator<number>();
    const seqs = ['0/1', '0/2', '0/A', '1/0'].map((lsn, i) => c.received(lsn, i));
    expect(seqs.map((s) => c.complete(s)?.endLsn)).toEqual(['0/1', '0/2', '0/A', '1/0']);
  });

  it('lets transactions without events advance the position like any other', () => {
    const c = createCheckpointCoordinator<string>();
    const appended = c.received('0/100', 'with events');
    const empty = c.received('0/200', 'no mapper wanted it');
    expect(c.complete(empty)).toBeNull();
    expect(c.complete(appended)?.endLsn).toBe('0/200');
  });

  it('never passes a failed transaction', () => {
    const c = createCheckpointCoordinator<string>();
    const a = c.received('0/10', 'a');
    const bad = c.received('0/20', 'bad');
    const later = c.received('0/30', 'later');
    expect(c.complete(a)?.endLsn).toBe('0/10');
    c.fail(bad);
    expect(c.halted).toBe(true);
    expect(c.complete(later)).toBeNull();
    expect(c.acknowledgeable?.endLsn).toBe('0/10');
  });

  it('still acknowledges earlier transactions that become durable after a later one failed', () => {
    const c = createCheckpointCoordinator<string>();
    const a = c.received('0/10', 'a');
    const b = c.received('0/20', 'b');
    const bad = c.received('0/30', 'bad');
    const later = c.received('0/40', 'later');
    c.fail(bad);
    expect(c.complete(later)).toBeNull();
    expect(c.complete(b)).toBeNull();
    expect(c.complete(a)?.endLsn).toBe('0/20'); // up to, never past, the failed one
    expect(c.pending).toBe(2);
  });

  it('compares LSNs numerically and refuses out-of-order registration', () => {
    const c = createCheckpointCoordinator();
    c.received('0/9', null);
    c.received('0/10', null); // 0x10 > 0x9, although "0/10" < "0/9" as text
    expect(() => c.received('0/10', null)).toThrow(/ascending end LSN/);
    expect(() => c.received('0/A', null)).toThrow(/ascending end LSN/);
    expect(c.receivedLsn).toBe('0/10');
  });

  it('rejects unknown or already acknowledged sequence numbers', () => {
    const c = createCheckpointCoordinator();
    const a = c.received('0/1', null);
    c.complete(a);
    expect(() => c.complete(a)).toThrow(/unknown or already acknowledged/);
    expect(() => c.complete(42)).toThrow(/unknown/);
  });

  it('keeps working across many transactions (internal compaction)', () => {
    const c = createCheckpointCoordinator<number>();
    const seqs: number[] = [];
    for (let i = 1; i <= 5000; i++) seqs.push(c.received(`0/${i.toString(16)}`, i));
    // Complete in pairs swapped: (2,1), (4,3), ...
    let last = null;
    for (let i = 0; i < seqs.length; i += 2) {
      expect(c.complete(seqs[i + 1]!)).toBeNull();
      last = c.complete(seqs[i]!);
      expect(last?.payload).toBe(i + 2);
    }
    expect(last?.endLsn).toBe(`0/${(5000).toString(16).toUpperCase()}`);
    expect(c.pending).toBe(0);
  });
});
