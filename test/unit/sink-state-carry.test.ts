// The stream states carried over a restart: what is written decodes to the same states, part by
// part, and what is not ours (another assembler's unit, a malformed part) is not carried.
import { describe, expect, it } from 'vitest';
import { decodePart, encodeStates, type CarriedState } from '../../src/sink/state-carry.js';
import type { ReceiptUnit } from '../../src/sink/receipt.js';

const tx = (n: number, assembler = 'asm'): ReceiptUnit => ({ kind: 'transaction', assembler, source: '7391029384756102938', commitLsn: `0/${(0x1000 + n).toString(16).toUpperCase()}`, xid: 700 + n });
const snap: ReceiptUnit = { kind: 'snapshot', assembler: 'asm', lsn: '1/2', generation: '3', sequence: 9, table: 'public.orders', key: '{"id":"a|b\\"c"}' };

function roundTrip(states: CarriedState[], assembler = 'asm'): { parts: number; states: CarriedState[] } {
  const parts = encodeStates(states, 'save-1');
  const out: CarriedState[] = [];
  for (const part of parts) decodePart(JSON.parse(JSON.stringify(part)) as Record<string, unknown>, assembler, out);
  return { parts: parts.length, states: out };
}

describe('carried stream states', () => {
  it('decode to what was saved: transaction and snapshot receipts, both scopes, foreign tails, big revisions', () => {
    const shared = tx(1);
    const states: CarriedState[] = [
      { stream: 'order-1', revision: 0n, unit: shared, ordinal: 0, count: 2, scope: 'stream' },
      { stream: 'order-2', revision: 5n, unit: shared, ordinal: 1, count: 2, scope: 'stream' },
      { stream: 'order-3', revision: 2n ** 62n, unit: snap, ordinal: 0, count: 1, scope: 'stream' },
      { stream: 'bulk-ü', revision: 12n, unit: tx(2), ordinal: 40_000, count: 60_000, scope: 'unit' },
      { stream: 'foreign', revision: 3n, unit: null, ordinal: 0, count: 0, scope: 'stream' },
    ];
    expect(roundTrip(states)).toEqual({ parts: 1, states });
  });

  it('are split into parts of bounded size, each with its own units, in order', () => {
    const states: CarriedState[] = Array.from({ length: 20_000 }, (_, i) => ({ stream: `order-${i}`, revision: BigInt(i), unit: tx(i % 7), ordinal: 0, count: 1, scope: 'stream' as const }));
    const parts = encodeStates(states, 'save-2');
    expect(parts.length).toBeGreaterThan(1);
    for (const [i, part] of parts.entries()) {
      expect(part).toMatchObject({ save: 'save-2', part: i, parts: parts.length });
      expect(JSON.stringify(part).length).toBeLessThan(400 * 1024);
    }
    expect(roundTrip(states).states).toEqual(states);
  });

  it('leaves out streams whose receipt is another assembler\'s, and refuses malformed parts', () => {
    const states: CarriedState[] = [
      { stream: 'a', revision: 1n, unit: tx(1), ordinal: 0, count: 1, scope: 'stream' },
      { stream: 'b', revision: 1n, unit: tx(1, 'other'), ordinal: 0, count: 1, scope: 'stream' },
    ];
    expect(roundTrip(states).states.map((s) => s.stream)).toEqual(['a']);
    expect(() => decodePart({ units: [], states: ['a', 'x', -1, 0, 0, 0] }, 'asm', [])).toThrow(/malformed/);
    expect(() => decodePart({ units: [], states: ['a', '1', -1, 0] }, 'asm', [])).toThrow(/malformed/);
  });

  it('write snapshot units as their own sequence and key over one shared row per chunk', () => {
    const record = (i: number, chunk: number, source?: string): ReceiptUnit => ({
      kind: 'snapshot', assembler: 'asm', ...(source === undefined ? {} : { source }), lsn: `0/${(0x2000 + chunk).toString(16).toUpperCase()}`,
      generation: 'g-2026-12-06', sequence: i, table: chunk % 2 ? 'public.invoices' : 'public.customers', key: JSON.stringify([['id', `inv_${String(i).padStart(7, '0')}`]]),
    });
    // Records of three chunks, interleaved as a cache may order them after streaming, with transactions among them.
    const states: CarriedState[] = Array.from({ length: 2_000 }, (_, i) => ({
      stream: `invoice-${i}`, revision: BigInt(i % 3), unit: i % 10 === 9 ? tx(i) : record(i, i % 3, i % 3 === 2 ? undefined : '7391029384756102938'), ordinal: 0, count: 1, scope: 'stream' as const,
    }));
    const parts = encodeStates(states, 'save-3');
    expect(parts).toHaveLength(1);
    const units = parts[0]!['units'] as unknown[][];
    expect(units.filter((row) => row[0] === 'c')).toHaveLength(3);
    expect(units.filter((row) => row[0] === 'r')).toHaveLength(1_800);
    expect(units.filter((row) => row[0] === 't')).toHaveLength(200);
    expect(roundTrip(states).states).toEqual(states);
    // ≈ 70 characters per snapshot state here; a whole unit per state (the format before) took ≈ 170.
    expect(JSON.stringify(parts[0]).length / states.length).toBeLessThan(90);
  });

  it('still read a save that wrote each snapshot unit whole (before 2026-12-06)', () => {
    const part = {
      save: 'old', part: 0, parts: 1,
      units: [['s', 'asm', '7391029384756102938', '1/2', '3', 9, 'public.orders', '{"id":"a"}'], ['s', 'asm', null, '1/2', '3', 10, 'public.orders', '{"id":"b"}'], ['t', 'asm', null, '0/10', 7]],
      states: ['order-a', '0', 0, 0, 1, 0, 'order-b', '4', 1, 0, 1, 0, 'order-c', '2', 2, 1, 2, 1],
    };
    const out: CarriedState[] = [];
    decodePart(part, 'asm', out);
    expect(out).toEqual([
      { stream: 'order-a', revision: 0n, unit: { kind: 'snapshot', assembler: 'asm', source: '7391029384756102938', lsn: '1/2', generation: '3', sequence: 9, table: 'public.orders', key: '{"id":"a"}' }, ordinal: 0, count: 1, scope: 'stream' },
      { stream: 'order-b', revision: 4n, unit: { kind: 'snapshot', assembler: 'asm', lsn: '1/2', generation: '3', sequence: 10, table: 'public.orders', key: '{"id":"b"}' }, ordinal: 0, count: 1, scope: 'stream' },
      { stream: 'order-c', revision: 2n, unit: { kind: 'transaction', assembler: 'asm', commitLsn: '0/10', xid: 7 }, ordinal: 1, count: 2, scope: 'unit' },
    ]);
  });

  it('leave out a snapshot unit whose shared row is missing, not a shared row, or another assembler\'s', () => {
    const part = {
      units: [['c', 'asm', null, '1/2', 'g', 'public.orders'], ['r', 0, 1, 'k1'], ['r', 3, 2, 'k2'], ['r', 1, 3, 'k3'], ['c', 'other', null, '1/2', 'g', 'public.orders'], ['r', 4, 4, 'k4'], ['r', 6, 5, 'k5'], ['c', 'asm', null, '1/2', 'g', 'public.orders']],
      states: ['ok', '0', 1, 0, 1, 0, 'forward', '0', 2, 0, 1, 0, 'not-shared', '0', 3, 0, 1, 0, 'foreign', '0', 5, 0, 1, 0, 'later', '0', 6, 0, 1, 0, 'shared-row-itself', '0', 0, 0, 1, 0],
    };
    const out: CarriedState[] = [];
    decodePart(part, 'asm', out);
    expect(out).toEqual([{ stream: 'ok', revision: 0n, unit: { kind: 'snapshot', assembler: 'asm', lsn: '1/2', generation: 'g', sequence: 1, table: 'public.orders', key: 'k1' }, ordinal: 0, count: 1, scope: 'stream' }]);
  });

  it('of an empty cache is no part at all', () => {
    expect(encodeStates([], 's')).toEqual([]);
  });
});
