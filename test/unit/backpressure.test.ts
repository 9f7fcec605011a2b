import { describe, expect, it } from 'vitest';
import { flowChange, type FlowLimits } from '../../src/source/backpressure.js';

const limits: FlowLimits = { maxInFlightTransactions: 100, maxInFlightBytes: 1_000, maxPendingMessages: 10 };

describe('backpressure', () => {
  it.each([
    ['transactions in flight', 100, 0, 0],
    ['bytes in flight', 0, 1_000, 0],
    ['messages waiting to be taken in', 0, 0, 10],
  ])('pauses reading at the limit of %s', (_name, transactions, bytes, pending) => {
    expect(flowChange(false, transactions, bytes, pending, limits)).toBe('pause');
  });

  it('keeps reading below every limit', () => {
    expect(flowChange(false, 99, 999, 9, limits)).toBeNull();
  });

  it('stays paused until well below every limit: ¾ of each in-flight limit, half the waiting messages', () => {
    expect(flowChange(true, 76, 0, 0, limits)).toBeNull();
    expect(flowChange(true, 75, 751, 0, limits)).toBeNull();
    expect(flowChange(true, 75, 750, 6, limits)).toBeNull();
    expect(flowChange(true, 75, 750, 5, limits)).toBe('resume');
  });
});
