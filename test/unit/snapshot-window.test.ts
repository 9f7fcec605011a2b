// The watermark window, fed crafted transaction sequences: which chunk rows survive, and where
// they land relative to the stream's changes.
import { describe, expect, it } from 'vitest';
import { createWatermarkWindow, encodeWatermark, invisibleTo, WATERMARK_PREFIX, type SnapshotChunk, type WindowOutput } from '../../src/source/snapshot/index.js';
import type { Change, MessageChange, RelationVersion, Row } from '../../src/source/types.js';

const relation = (table: string): RelationVersion => ({ relationId: 1, table, schema: 'public', name: table.split('.')[1]!, replicaIdentity: 'default', columns: [], version: 1 });
const T = 'public.item';
const ins = (after: Row, table = T): Change => ({ op: 'insert', table, relation: relation(table), after, key: { id: after.id } });
const upd = (after: Row, oldKey: Row | null = null, table = T): Change => ({ op: 'update', table, relation: relation(table), before: null, after, key: { id: after.id }, oldKey });
const del = (id: unknown, table = T): Change => ({ op: 'delete', table, relation: relation(table), before: { id }, key: { id } });
const wm = (kind: 'low' | 'high', chunk: number, run = 'r1', table = T, keyColumns = ['id']): MessageChange => ({
  op: 'message', prefix: WATERMARK_PREFIX, transactional: true, lsn: '0/1',
  content: Buffer.from(encodeWatermark({ kind, run, generation: '7', table, chunk, ...(kind === 'low' ? { keyColumns } : {}) })),
});
const chunk = (ids: number[], n = 1, extra: Partial<SnapshotChunk> = {}): SnapshotChunk => ({
  run: 'r1', generation: '7', table: T, chunk: n, keyColumns: ['id'],
  rows: ids.map((id) => ({ after: { id, v: `snap-${id}` }, key: { id } })), lastKey: ids.length ? [String(ids[ids.length - 1])] : null, tableDone: false, ...extra,
});

/** Feeds [xid, changes] pairs; returns a compact trace: `tx:<xid>`, `read:<id>`, `done:<emitted>/<selected>`. */
function run(window: ReturnType<typeof createWatermarkWindow>, txs: [number, Change[]][], before?: (xid: number) => void): string[] {
  const out: WindowOutput<{ xid: number }>[] = [];
  for (const [xid, changes] of txs) {
    before?.(xid);
    out.push(...window.accept({ xid }, changes));
  }
  return out.map((o) => (o.kind === 'transaction' ? `tx:${o.transaction.xid}` : o.kind === 'snapshot' ? `read:${String(o.record.change.key.id)}` : `done:${o.chunk.emitted}/${o.chunk.selected}`));
}

describe('watermark window', () => {
  it('drops chunk rows changed between the watermarks and emits the rest right after the high watermark', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    const trace = run(w, [
      [1, [upd({ id: 1, v: 'before-window' })]], // before the low watermark: chunk row 1 is newer, stays
      [2, [wm('low', 1)]],
      [3, [upd({ id: 2, v: 'in-window' })]],
      [4, [del(3)]],
      [5, [ins({ id: 9, v: 'other key' })]],
      [6, [wm('high', 1)]],
      [7, [upd({ id: 4, v: 'after-window' })]], // after: comes after the read record of 4
    ], (xid) => { if (xid === 3) w.addChunk(chunk([1, 2, 3, 4])); });
    expect(trace).toEqual(['tx:1', 'tx:2', 'tx:3', 'tx:4', 'tx:5', 'tx:6', 'read:1', 'read:4', 'done:2/4', 'tx:7']);
  });

  it('keeps the records\' typed content and generation, and reports superseded rows and the resume key', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    w.accept({ xid: 1 }, [wm('low', 1)]);
    w.addChunk(chunk([5, 6]));
    w.accept({ xid: 2 }, [del(6)]);
    const out = w.accept({ xid: 3 }, [wm('high', 1)]);
    expect(out[1]).toEqual({ kind: 'snapshot', record: { kind: 'snapshot', snapshotGeneration: '7', table: T, change: { op: 'read', table: T, after: { id: 5, v: 'snap-5' }, key: { id: 5 }, snapshotGeneration: '7' } } });
    expect(out[2]).toEqual({ kind: 'chunk-complete', chunk: { run: 'r1', generation: '7', table: T, chunk: 1, selected: 2, emitted: 1, superseded: 1, lastKey: ['6'], tableDone: false, retry: false, blockedBy: [] } });
  });

  it('drops both keys of a primary-key change inside the window', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    w.addChunk(chunk([1, 2, 3])); // handed over before the low watermark reached the stream
    const trace = run(w, [[1, [wm('low', 1)]], [2, [upd({ id: 30 }, { id: 2 })]], [3, [wm('high', 1)]]]);
    expect(trace).toEqual(['tx:1', 'tx:2', 'tx:3', 'read:1', 'read:3', 'done:2/3']);
  });

  it('drops the whole chunk when the table is truncated inside the window', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    w.addChunk(chunk([1, 2]));
    const trunc: Change = { op: 'truncate', tables: [T], cascade: false, restartIdentity: false };
    expect(run(w, [[1, [wm('low', 1)]], [2, [trunc]], [3, [wm('high', 1)]]])).toEqual(['tx:1', 'tx:2', 'tx:3', 'done:0/2']);
  });

  it('ignores changes of other tables, other runs\' watermarks and unrelated messages', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    w.addChunk(chunk([1, 2]));
    const other: MessageChange = { op: 'message', prefix: 'app.audit', transactional: true, lsn: '0/1', content: Buffer.from('x') };
    const trace = run(w, [
      [1, [wm('low', 1)]],
      [2, [upd({ id: 1 }, null, 'public.other'), other]],
      [3, [wm('high', 1, 'old-run')]],
      [4, [wm('low', 2, 'old-run'), upd({ id: 2 })]],
      [5, [wm('high', 1)]],
    ]);
    expect(trace).toEqual(['tx:1', 'tx:2', 'tx:3', 'tx:4', 'tx:5', 'read:1', 'done:1/2']);
  });

  it('abandons a window whose high watermark never came when the next low watermark arrives', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    const trace = run(w, [
      [1, [wm('low', 1)]], // attempt 1: the reader retried before selecting
      [2, [upd({ id: 1 })]],
      [3, [wm('low', 2)]],
      [4, [upd({ id: 2 })]],
      [5, [wm('high', 2)]],
    ], (xid) => { if (xid === 4) w.addChunk(chunk([1, 2, 3], 2)); });
    expect(trace).toEqual(['tx:1', 'tx:2', 'tx:3', 'tx:4', 'tx:5', 'read:1', 'read:3', 'done:2/3']);
    expect(w.open).toBeNull();
  });

  it('compares composite keys with bigint and text parts by value', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    const rows = [[1n, 'a'], [1n, 'b'], [2n, 'a']].map(([k, s]) => ({ after: { k, s, v: 0 }, key: { k, s } }));
    w.addChunk({ ...chunk([]), keyColumns: ['k', 's'], rows });
    w.accept({ xid: 1 }, [wm('low', 1, 'r1', T, ['k', 's'])]);
    w.accept({ xid: 2 }, [{ op: 'update', table: T, relation: relation(T), before: null, after: { k: 1n, s: 'b', v: 1 }, key: { k: 1n, s: 'b' }, oldKey: null }]);
    const out = w.accept({ xid: 3 }, [wm('high', 1)]);
    expect(out.filter((o) => o.kind === 'snapshot').map((o) => (o.kind === 'snapshot' ? o.record.change.key : null))).toEqual([{ k: 1n, s: 'a' }, { k: 2n, s: 'a' }]);
  });

  it('also drops keys of transactions streamed before the low watermark that the chunk\'s snapshot still saw in progress (visibility gap)', () => {
    const sequence = (xip: number[]) => {
      const w = createWatermarkWindow({ run: 'r1' });
      return run(w, [
        [10, [wm('low', 1)]], // priming watermark: history of the table starts here
        [50, [upd({ id: 2, v: 'committed just before the low watermark' })]],
        [51, [upd({ id: 3, v: 'visible to the chunk' })]],
        [11, [wm('low', 2)]],
        [12, [wm('high', 2)]],
      ], (xid) => { if (xid === 12) w.addChunk({ ...chunk([1, 2, 3], 2), snapshot: { xmin: 40, xmax: 1000, xip } }); });
    };
    // xid 50 was still in progress for the chunk's snapshot: its row 2 is stale, dropped.
    expect(sequence([50, 999])).toEqual(['tx:10', 'tx:50', 'tx:51', 'tx:11', 'tx:12', 'read:1', 'read:3', 'done:2/3']);
    // Visible to the snapshot: the chunk row is at least as new, kept.
    expect(sequence([])).toEqual(['tx:10', 'tx:50', 'tx:51', 'tx:11', 'tx:12', 'read:1', 'read:2', 'read:3', 'done:3/3']);
  });

  it('treats xids at or after the snapshot\'s xmax as unseen (a committing transaction not yet counted), modulo 2^32', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    const trace = run(w, [[10, [wm('low', 1)]], [742, [del(2)]], [11, [wm('low', 2)]], [12, [wm('high', 2)]]],
      (xid) => { if (xid === 12) w.addChunk({ ...chunk([1, 2], 2), snapshot: { xmin: 742, xmax: 742, xip: [] } }); });
    expect(trace).toEqual(['tx:10', 'tx:742', 'tx:11', 'tx:12', 'read:1', 'done:1/2']);
    expect(invisibleTo({ xmin: 0xfffffff0, xmax: 0xfffffffa, xip: [] }, 3)).toBe(true); // wrapped: 3 follows 0xfffffffa
    expect(invisibleTo({ xmin: 0xfffffff0, xmax: 0xfffffffa, xip: [] }, 0xfffffff5)).toBe(false);
  });

  it('marks a chunk retry when a transaction older than the table\'s history is still invisible to its snapshot', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    w.accept({ xid: 500 }, [upd({ id: 1, v: 'committed, not yet visible' })]); // before any watermark
    w.accept({ xid: 10 }, [wm('low', 1)]);
    w.addChunk({ ...chunk([1, 2], 1), snapshot: { xmin: 500, xmax: 600, xip: [500] } });
    const out = w.accept({ xid: 11 }, [wm('high', 1)]);
    expect(out).toEqual([
      { kind: 'transaction', transaction: { xid: 11 } },
      { kind: 'chunk-complete', chunk: expect.objectContaining({ retry: true, blockedBy: [500], emitted: 0, lastKey: ['2'] }) as unknown },
    ]);
    // Once it is visible, the same range goes through.
    w.accept({ xid: 12 }, [wm('low', 2)]);
    w.addChunk({ ...chunk([1, 2], 2), snapshot: { xmin: 601, xmax: 601, xip: [] } });
    expect(w.accept({ xid: 13 }, [wm('high', 2)]).map((o) => o.kind)).toEqual(['transaction', 'snapshot', 'snapshot', 'chunk-complete']);
  });

  it('carries a still-invisible transaction\'s keys into later chunks instead of blocking them', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    const snapshot = { xmin: 60, xmax: 100, xip: [60] }; // xid 60 stays invisible throughout
    const trace = run(w, [
      [10, [wm('low', 1)]], // priming
      [60, [del(2), del(12)]], // committed, streamed, not yet visible
      [11, [wm('low', 2)]],
      [12, [wm('high', 2)]],
      [13, [wm('low', 3)]],
      [14, [wm('high', 3)]],
    ], (xid) => {
      if (xid === 12) w.addChunk({ ...chunk([1, 2, 3], 2), snapshot });
      if (xid === 14) w.addChunk({ ...chunk([11, 12, 13], 3), snapshot });
    });
    expect(trace).toEqual(['tx:10', 'tx:60', 'tx:11', 'tx:12', 'read:1', 'read:3', 'done:2/3', 'tx:13', 'tx:14', 'read:11', 'read:13', 'done:2/3']);
  });

  it('keeps the history across chunks of one table and forgets it for another table', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    const trace = run(w, [
      [1, [wm('low', 1)]],
      [2, [wm('high', 1)]],
      [40, [del(7)]], // after chunk 1, before chunk 2's low watermark
      [3, [wm('low', 2)]],
      [4, [wm('high', 2)]],
      [41, [del(8, 'public.other')]],
      [5, [wm('low', 3, 'r1', 'public.other')]],
      [6, [wm('high', 3, 'r1', 'public.other')]],
    ], (xid) => {
      if (xid === 2) w.addChunk(chunk([1], 1));
      if (xid === 4) w.addChunk({ ...chunk([7], 2), snapshot: { xmin: 40, xmax: 100, xip: [40] } });
      if (xid === 6) w.addChunk({ ...chunk([8], 3), table: 'public.other', snapshot: { xmin: 20, xmax: 100, xip: [] } });
    });
    expect(trace).toEqual(['tx:1', 'tx:2', 'read:1', 'done:1/1', 'tx:40', 'tx:3', 'tx:4', 'done:0/1', 'tx:41', 'tx:5', 'tx:6', 'read:8', 'done:1/1']);
  });

  it('reads a spilled transaction\'s changes as a stream, and falls back to the change\'s key without key columns in the watermark', async () => {
    const w = createWatermarkWindow({ run: 'r1' });
    const legacyLow: MessageChange = { ...wm('low', 1), content: Buffer.from(encodeWatermark({ kind: 'low', run: 'r1', generation: '7', table: T, chunk: 1 })) };
    w.accept({ xid: 1 }, [legacyLow]);
    w.addChunk(chunk([1, 2, 3]));
    async function* changes() { yield upd({ id: 1, v: 'x' }); yield del(3); }
    const streamed = await w.acceptStream({ xid: 2 }, changes());
    expect(streamed).toEqual([{ kind: 'transaction', transaction: { xid: 2 } }]);
    const out = w.accept({ xid: 3 }, [wm('high', 1)]);
    expect(out.flatMap((o) => (o.kind === 'snapshot' ? [o.record.change.key] : []))).toEqual([{ id: 2 }]);
  });

  it('refuses a chunk of another run', () => {
    const w = createWatermarkWindow({ run: 'r1' });
    expect(() => w.addChunk({ ...chunk([1]), run: 'r2' })).toThrow(RangeError);
  });
});
