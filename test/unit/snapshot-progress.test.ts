// Durable progress (file store: atomic replace, validation) and the progress reporter's formatting.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adHocSnapshotProgress, createFileProgressStore, createProgressReporter, formatCount, formatDuration, formatProgressLine, formatProgressRecord,
  isSnapshotFinished, newSnapshotProgress, updateTable, type TableProgress,
} from '../../src/source/snapshot/index.js';

let dir: string;
beforeAll(async () => { dir = await mkdtemp(path.join(os.tmpdir(), 'snapshot-progress-')); });
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

const now = new Date('2026-01-02T03:04:05.000Z');

describe('snapshot progress store', () => {
  it('returns null before the first save, then what was saved; replaces atomically without leftovers', async () => {
    const file = path.join(dir, 'p.json');
    const store = createFileProgressStore(file);
    expect(await store.load()).toBeNull();
    let p = newSnapshotProgress({ generation: '2', kind: 'incremental', mode: 'when_needed', tables: ['public.a', 'public.b'], reason: 'slot lost', now });
    await store.save(p);
    p = updateTable(p, 'public.a', { status: 'running', lastKey: ['10', 'x\ty'], maxKey: ['99', 'z'], rowsDone: 10, estimatedRows: 100, chunksDone: 1 }, now);
    await store.save(p);
    expect(await store.load()).toEqual(p);
    expect(await readdir(dir)).toEqual(['p.json']);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ version: 1, generation: '2', tables: [{ table: 'public.a', lastKey: ['10', 'x\ty'] }, { table: 'public.b', status: 'pending' }] });
    expect(isSnapshotFinished(p)).toBe(false);
    expect(isSnapshotFinished(updateTable(updateTable(p, 'public.a', { status: 'done' }), 'public.b', { status: 'done' }))).toBe(true);
  });

  it('refuses a corrupt or foreign file, naming the field', async () => {
    const file = path.join(dir, 'bad.json');
    await writeFile(file, '{"version":1,"generation":"1","kind":"initial","tables":"nope"}');
    await expect(createFileProgressStore(file).load()).rejects.toMatchObject({ code: 'SNAPSHOT_PROGRESS_INVALID' });
    await writeFile(file, 'not json');
    await expect(createFileProgressStore(file).load()).rejects.toMatchObject({ code: 'SNAPSHOT_PROGRESS_INVALID' });
  });

  it('updateTable refuses a table outside the generation', () => {
    const p = newSnapshotProgress({ generation: '1', kind: 'initial', mode: 'initial', tables: ['public.a'], reason: 'r' });
    expect(() => updateTable(p, 'public.zzz', { status: 'done' })).toThrow(RangeError);
  });

  it('ad hoc snapshots are a new generation over captured tables only', () => {
    const p = adHocSnapshotProgress({ tables: ['public.a'], capturedTables: ['public.a', 'public.b'], lastGeneration: '3', now });
    expect(p).toMatchObject({ generation: '4', kind: 'ad_hoc', tables: [{ table: 'public.a', status: 'pending' }] });
    expect(() => adHocSnapshotProgress({ tables: ['public.c'], capturedTables: ['public.a'], lastGeneration: null })).toThrow(/not captured/);
    expect(() => adHocSnapshotProgress({ tables: [], capturedTables: ['public.a'], lastGeneration: null })).toThrow(/at least one/);
  });
});

describe('progress formatting', () => {
  const t = (over: Partial<TableProgress>): TableProgress => ({ table: 'public.invoice', status: 'running', lastKey: null, maxKey: null, rowsDone: 100_000, estimatedRows: 200_000, chunksDone: 5, ...over });

  it('formats counts and durations', () => {
    expect([formatCount(999), formatCount(12_345), formatCount(1_234_567), formatCount(2e9)]).toEqual(['999', '12.3k', '1.2M', '2.0G']);
    expect([formatDuration(4.4), formatDuration(725), formatDuration(11_220), formatDuration(null), formatDuration(Infinity)]).toEqual(['4s', '12m05s', '3h07m', '--', '--']);
  });

  it('draws a bar with percentage, counts, rate and ETA', () => {
    expect(formatProgressLine(t({}), { rowsPerSecond: 25_000 })).toBe('public.invoice  [##########----------]  50%  100.0k/200.0k  25.0k rows/s  ETA 4s');
    expect(formatProgressLine(t({ estimatedRows: null }), { rowsPerSecond: null }, { barWidth: 4 })).toBe('public.invoice  [????]   ?%  100.0k/?  -- rows/s  ETA --');
    expect(formatProgressLine(t({ status: 'done', rowsDone: 210_000 }), { rowsPerSecond: 1000 }, { barWidth: 4, nameWidth: 16 })).toBe('public.invoice    [####] 100%  210.0k/210.0k  1000 rows/s  done');
  });

  it('writes one JSON record per table', () => {
    const p = newSnapshotProgress({ generation: '7', kind: 'initial', mode: 'initial', tables: ['public.invoice'], reason: 'r' });
    expect(JSON.parse(formatProgressRecord(p, t({}), { rowsPerSecond: 25_000.4 }, now))).toEqual({
      time: '2026-01-02T03:04:05.000Z', msg: 'snapshot progress', generation: '7', kind: 'initial', table: 'public.invoice',
      status: 'running', rowsDone: 100_000, estimatedRows: 200_000, rowsPerSecond: 25_000, etaSeconds: 4,
    });
  });

  it('redraws in place on a TTY and logs lines at an interval elsewhere', () => {
    let clock = 0;
    const tty: string[] = [];
    const reporter = createProgressReporter({ output: { isTTY: true, write: (s: string) => tty.push(s) }, intervalMs: 100, now: () => clock });
    let p = newSnapshotProgress({ generation: '1', kind: 'initial', mode: 'initial', tables: ['public.a', 'public.b'], reason: 'r' });
    p = updateTable(p, 'public.a', { status: 'running', rowsDone: 0, estimatedRows: 1000 });
    reporter.update(p);
    clock = 50;
    reporter.update(p); // within the interval: no redraw
    clock = 2000;
    reporter.update(updateTable(p, 'public.a', { rowsDone: 500 }));
    expect(tty).toHaveLength(2);
    expect(tty[1]!.startsWith('\x1b[2F')).toBe(true);
    expect(tty[1]).toContain('250 rows/s');

    const log: string[] = [];
    const plain = createProgressReporter({ output: { write: (s: string) => log.push(s) }, intervalMs: 10_000, now: () => clock });
    plain.update(p);
    plain.update(p);
    plain.close();
    const lines = log.join('').trim().split('\n').map((l) => JSON.parse(l) as { table: string });
    expect(lines.map((l) => l.table)).toEqual(['public.a', 'public.a']); // pending tables are not logged
  });
});
