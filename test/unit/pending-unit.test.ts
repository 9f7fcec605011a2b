// A queued unit until durable, without a promise per unit: counted once, its one listener told
// once (also when it listens late), a promise only when asked — settled like the append.
import { describe, expect, it } from 'vitest';
import { PendingUnit, type UnitCounter } from '../../src/pipeline/pending-unit.js';
import type { AppendOutcome } from '../../src/sink/index.js';

const outcome: AppendOutcome = { appended: 2, skipped: 0, streams: [], checkpoint: 'appended', mode: 'multi-stream' };

function recorder() {
  const counted: [AppendOutcome, string | readonly string[], boolean][] = [];
  const counter: UnitCounter = { count: (o, types, parked) => counted.push([o, types, parked]) };
  const told: string[] = [];
  const listener = { appended: (o: AppendOutcome) => told.push(`appended ${o.appended}`), failed: (e: unknown) => told.push(`failed ${(e as Error).message}`) };
  return { counted, counter, told, listener };
}

describe('pending unit', () => {
  it('appended: counted once with its types, the listener told once, a later promise resolved', async () => {
    const { counted, counter, told, listener } = recorder();
    const unit = new PendingUnit(counter, ['A', 'B'], true);
    unit.listen(listener);
    expect(told).toEqual([]);
    unit.appended(outcome);
    unit.appended(outcome);
    unit.failed(new Error('late'));
    expect(counted).toEqual([[outcome, ['A', 'B'], true]]);
    expect(told).toEqual(['appended 2']);
    await expect(unit.durable).resolves.toBe(outcome);
    expect(() => unit.listen(listener)).not.toThrow(); // the first listener was told and let go
  });

  it('failed: not counted, the listener told, a promise asked before rejects with the error', async () => {
    const { counted, counter, told, listener } = recorder();
    const unit = new PendingUnit(counter, 'A', false);
    const durable = unit.durable;
    unit.listen(listener);
    unit.failed(new Error('no server'));
    unit.appended(outcome);
    expect(counted).toEqual([]);
    expect(told).toEqual(['failed no server']);
    await expect(durable).rejects.toThrow('no server');
    expect(unit.durable).toBe(durable);
  });

  it('a listener that comes after the end is told later, not during listen', async () => {
    const { counter, told, listener } = recorder();
    const unit = new PendingUnit(counter, 'A', false);
    unit.appended(outcome);
    unit.listen(listener);
    expect(told).toEqual([]);
    await Promise.resolve();
    expect(told).toEqual(['appended 2']);
  });

  it('one listener at a time', () => {
    const { counter, listener } = recorder();
    const unit = new PendingUnit(counter, 'A', false);
    unit.listen(listener);
    expect(() => unit.listen(listener)).toThrow(/one listener/);
  });
});
