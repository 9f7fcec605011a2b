// LSN parsing and comparison (a hand-written parser on the hot path) against a plain reference:
// the regex PostgreSQL's `%X/%X` form matches, and bigint arithmetic.
import { describe, expect, it } from 'vitest';
import { canonicalLsn, compareLsn, decodeCheckpoint, encodeCheckpoint, isLsn, parseLsn } from '../../src/source/position.js';

const reference = (lsn: string): bigint | null => {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn);
  return m ? (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`) : null;
};

describe('LSNs', () => {
  const fixed = ['0/0', '0/1', '1/0', 'FFFFFFFF/FFFFFFFF', 'ffffffff/0', '16/B374D848', '0/0a', '00000000/00000001', 'aB/Cd',
    '', '/', '0/', '/0', '0//0', '0/0/0', '123456789/0', '0/123456789', 'G/0', '0/ 1', ' 0/1', '0x1/2', '-1/2', '1.5/2', '０/1'];
  const random = Array.from({ length: 3000 }, (_, i) => {
    const alphabet = '0123456789abcdefABCDEF/xg ';
    let s = '';
    const length = 1 + ((i * 7) % 19);
    for (let j = 0; j < length; j++) s += alphabet[(i * 31 + j * 17 + ((i * j) % 13)) % alphabet.length];
    return s;
  });
  const valid = Array.from({ length: 500 }, (_, i) => `${((i * 2654435761) >>> (i % 29)).toString(16)}/${((i * 40503) ^ (i << 7)).toString(16).slice(0, 8)}`);

  it('accepts exactly what the %X/%X pattern accepts, with the same value', () => {
    for (const lsn of [...fixed, ...random, ...valid]) {
      const expected = reference(lsn);
      expect(isLsn(lsn)).toBe(expected !== null);
      if (expected === null) {
        expect(() => parseLsn(lsn), lsn).toThrow(RangeError);
        expect(() => compareLsn(lsn, '0/0'), lsn).toThrow(RangeError);
        expect(() => compareLsn('0/0', lsn), lsn).toThrow(RangeError);
      } else {
        expect(parseLsn(lsn), lsn).toBe(expected);
        expect(parseLsn(canonicalLsn(lsn))).toBe(expected);
      }
    }
    expect(() => compareLsn(7 as unknown as string, '0/0')).toThrow(RangeError);
  });

  it('compares as 64-bit numbers, never as text', () => {
    const all = [...fixed, ...valid].filter((lsn) => reference(lsn) !== null);
    for (let i = 0; i < all.length; i++) {
      for (let j = i; j < Math.min(all.length, i + 40); j++) {
        const a = reference(all[i]!)!;
        const b = reference(all[j]!)!;
        expect(Math.sign(compareLsn(all[i]!, all[j]!)), `${all[i]} vs ${all[j]}`).toBe(a < b ? -1 : a > b ? 1 : 0);
        expect(Math.sign(compareLsn(all[j]!, all[i]!))).toBe(a < b ? 1 : a > b ? -1 : 0);
      }
    }
    expect(compareLsn('0/9', '0/10')).toBeLessThan(0);
  });
});

describe('checkpoints', () => {
  it('encode every field, whichever source came before (the prefix is kept per system, timeline and slot), and decode back', () => {
    const sources = [
      { systemId: '7412345678901234567', timeline: 1, slot: 'shop' },
      { systemId: '7412345678901234567', timeline: 2, slot: 'shop' },
      { systemId: '7412345678901234567', timeline: 2, slot: 'shop_b' },
      { systemId: '1', timeline: 2, slot: 'shop_b' },
    ];
    for (let i = 0; i < 400; i++) {
      const source = sources[(i * 7) % sources.length]!;
      const parts = { ...source, commitLsn: `${(i % 3).toString(16)}/${(i * 40503).toString(16)}`, xid: (i * 2654435761) % 2 ** 32 };
      const checkpoint = encodeCheckpoint(parts);
      expect(checkpoint).toBe(`v1:${source.systemId}:${source.timeline}:${source.slot}:${canonicalLsn(parts.commitLsn)}:${parts.xid}`);
      expect(decodeCheckpoint(checkpoint)).toMatchObject({ ...parts, commitLsn: canonicalLsn(parts.commitLsn) });
    }
  });

  it('checks system, timeline, slot and xid, also right after a valid checkpoint of the same source', () => {
    const good = { systemId: '7412345678901234567', timeline: 1, slot: 'shop', commitLsn: '0/1', xid: 1 };
    for (const [bad, message] of [
      [{ timeline: 0 }, /timeline/],
      [{ timeline: 1.5 }, /timeline/],
      [{ systemId: '' }, /systemId/],
      [{ slot: 'Shop' }, /slot/],
      [{ xid: -1 }, /xid/],
      [{ xid: 2 ** 32 }, /xid/],
    ] as const) {
      encodeCheckpoint(good);
      expect(() => encodeCheckpoint({ ...good, ...bad })).toThrow(message);
    }
  });
});
