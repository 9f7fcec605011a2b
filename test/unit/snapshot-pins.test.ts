import { describe, expect, it } from 'vitest';
import { parsePins, pinRuns, type PinnedPosition } from '../../src/pipeline/snapshot-store.js';

const key = (table: string, k: string) => `${table}\u0000${k}`;

describe('snapshot pins as runs (snapshot-store.ts)', () => {
  it('given a chunk and some odd pins, when saved as runs and read back, then every pin keeps its position', () => {
    const pinned = new Map<string, PinnedPosition>();
    for (let i = 0; i < 5; i++) pinned.set(key('public.invoice', `[["id","inv_${i}"]]`), { lsn: '0/16B3748', sequence: 10 + i });
    pinned.set(key('public.customer', '[["id","c1"]]'), { lsn: '0/16B3748', sequence: 15 }); // another table
    pinned.set(key('public.customer', '[["id","c2"]]'), { lsn: '0/16B3748', sequence: 17 }); // a gap
    pinned.set(key('public.customer', '[["id","c3"]]'), { lsn: '0/1700000', sequence: 18 }); // another LSN
    pinned.set(key('public.a\u0000b', 'k'), { lsn: '0/1', sequence: 1 }); // a NUL in the key part stays with the key
    const runs = pinRuns(pinned);
    expect(runs.slice(0, 4)).toEqual([
      ['public.invoice', '0/16B3748', 10, ['[["id","inv_0"]]', '[["id","inv_1"]]', '[["id","inv_2"]]', '[["id","inv_3"]]', '[["id","inv_4"]]']],
      ['public.customer', '0/16B3748', 15, ['[["id","c1"]]']],
      ['public.customer', '0/16B3748', 17, ['[["id","c2"]]']],
      ['public.customer', '0/1700000', 18, ['[["id","c3"]]']],
    ]);
    const back = parsePins(JSON.parse(JSON.stringify({ pinnedRuns: runs })) as never);
    expect([...back].sort()).toEqual([...pinned].sort());
  });

  it('given a record written before runs (pinned per record), when read, then its pins are kept, and both forms merge', () => {
    const back = parsePins({ pinned: [['public.invoice', '[["id","x"]]', '0/5', 3]], pinnedRuns: [['public.invoice', '0/6', 4, ['[["id","y"]]']]] } as never);
    expect([...back]).toEqual([
      [key('public.invoice', '[["id","x"]]'), { lsn: '0/5', sequence: 3 }],
      [key('public.invoice', '[["id","y"]]'), { lsn: '0/6', sequence: 4 }],
    ]);
  });

  it('given malformed entries, when read, then they are skipped', () => {
    expect(parsePins({ pinned: [['t', 'k', '0/1']], pinnedRuns: [['t', '0/1', 'x', ['k']], ['t', '0/1', 1, 'k'], ['t', '0/1', 1, [2, 'k2']]] } as never)).toEqual(
      new Map([[key('t', 'k2'), { lsn: '0/1', sequence: 2 }]]),
    );
  });
});
