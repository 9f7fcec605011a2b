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

  it('of an empty cache is no part at all', () => {
    expect(encodeStates([], 's')).toEqual([]);
  });
});
