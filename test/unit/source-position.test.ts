// LSN parsing and comparison (a hand-written parser on the hot path) against a plain reference:
// the regex PostgreSQL's `%X/%X` form matches, and bigint arithmetic.
import { describe, expect, it } from 'vitest';
import { canonicalLsn, compareLsn, isLsn, parseLsn } from '../../src/source/position.js';

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
