import { describe, expect, it } from 'vitest';
import type { MapResult } from '../../src/mapping/index.js';
import { createSnapshotState, mapWhileSaving, queueSnapshotRecords } from '../../src/pipeline/snapshot-state.js';
import type { SnapshotRecord, SourceUnit } from '../../src/source/types.js';

// A snapshot chunk's records are mapped while the save that pins them is under way
// (snapshot-state.ts mapWhileSaving), and handed to the sink only once that save is durable.

const TABLE = 'public.invoice';

function record(id: string): SnapshotRecord {
  return { kind: 'snapshot', snapshotGeneration: 'g1', table: TABLE, change: { op: 'read', table: TABLE, after: { id }, key: { id }, snapshotGeneration: 'g1' } };
}

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** A handler whose mapping names the record (and its snapshot kind) in its one event. */
function handler(log: string[], failOn?: string) {
  return {
    mapUnit: (unit: SourceUnit): MapResult => {
      const id = ((unit as SnapshotRecord).change.key as { id: string }).id;
      if (id === failOn) throw new Error(`mapper config broken at ${id}`);
      log.push(`map ${id}`);
      return { events: [{ type: 'Mapped', id, kind: (unit as SnapshotRecord).snapshotKind } as never], failed: [] };
    },
  };
}

const ids = (n: number) => Array.from({ length: n }, (_, i) => `r${i}`);

describe('snapshot records mapped while their pins are saved (mapWhileSaving)', () => {
  it('given a save still under way, when the chunk is mapped, then every record is mapped before the save lands and the result waits for it', async () => {
    const log: string[] = [];
    const save = deferred();
    let settled = false;
    const mapping = mapWhileSaving({ handler: handler(log) }, save.promise, ids(100).map(record), 'ad_hoc', 'sys').then((m) => ((settled = true), m));
    // Wait (with a deadline) until the whole chunk is mapped: the save has not landed yet.
    for (let turn = 0; turn < 1_000 && log.length < 100; turn++) await new Promise((r) => setImmediate(r));
    expect(log).toHaveLength(100);
    expect(settled, 'not handed on before the save is durable').toBe(false);
    save.resolve();
    const mapped = await mapping;
    expect(mapped.results.map((m) => (m.events[0] as unknown as { id: string }).id)).toEqual(ids(100));
    expect((mapped.results[0]!.events[0] as unknown as { kind: string }).kind, 'mapped as the unit it is queued as (its snapshot kind filled in)').toBe('ad_hoc');
  });

  it('given a chunk of many records, when it is mapped, then other I/O callbacks run between its slices (the save request and the appender go on)', async () => {
    const log: string[] = [];
    const turns: number[] = [];
    const tick = () => setImmediate(() => {
      turns.push(log.length);
      if (log.length < 200) tick();
    });
    tick();
    await mapWhileSaving({ handler: handler(log) }, Promise.resolve(), ids(200).map(record), 'initial', 'sys');
    // Records mapped when each other callback ran: several distinct points inside the chunk.
    const inside = new Set(turns.filter((n) => n > 0 && n < 200));
    expect(inside.size).toBeGreaterThanOrEqual(3);
  });

  it('given the save fails, when the chunk was mapped, then the result is that failure (nothing is handed on)', async () => {
    const log: string[] = [];
    const save = deferred();
    const mapping = mapWhileSaving({ handler: handler(log) }, save.promise, ids(3).map(record), 'initial', 'sys');
    save.reject(new Error('progress append refused'));
    await expect(mapping).rejects.toThrow('progress append refused');
  });

  it('given a mapping error, when the save fails afterwards too, then the mapping error is given and the save\'s failure is not left unhandled', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const save = deferred();
      const mapping = mapWhileSaving({ handler: handler([], 'r1') }, save.promise, ids(3).map(record), 'initial', 'sys');
      await expect(mapping).rejects.toThrow('mapper config broken at r1');
      save.reject(new Error('progress append refused'));
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('given records mapped ahead, when they are queued, then each unit is handed over with its own mapping (not mapped again)', async () => {
    const log: string[] = [];
    const records = ids(3).map(record);
    const mapped = await mapWhileSaving({ handler: handler(log) }, Promise.resolve(), records, 'initial', 'sys');
    const handed: { id: string; mapped: MapResult | undefined }[] = [];
    const state = createSnapshotState();
    const positions = records.map((_, i) => ({ lsn: '0/10', sequence: i + 1 }));
    const deps = {
      control: { stopRequested: false, fatal: null },
      handler: {
        handleUnit: (unit: SourceUnit, _position: unknown, _source: string, m?: MapResult) => {
          handed.push({ id: ((unit as SnapshotRecord).change.key as { id: string }).id, mapped: m });
          return { durable: Promise.resolve({ appended: 1, skipped: 0 }) };
        },
      },
    };
    const { durable } = await queueSnapshotRecords(state, deps as never, { records, positions, systemId: 'sys', kind: 'initial', unpin: false, mapped });
    await durable;
    expect(handed.map((h) => h.id)).toEqual(['r0', 'r1', 'r2']);
    expect(handed.map((h) => h.mapped)).toEqual(mapped.results);
    expect(log, 'mapped once, ahead').toEqual(['map r0', 'map r1', 'map r2']);
    expect(state.counts).toEqual({ rows: 3, events: 3 });
  });
});
