// Reconciliation's pure parts: the cut rule per event, canonical states and range hashes, the
// fold of a range (what a stream read shows: `$tb`, tombstones), each kind of difference, masks,
// and the configuration's refusal of columns no mapper allowlists.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, defineConfig, parseConfig } from '../../src/config/index.js';
import { compareRange, destinationSum, fieldDifferences, foldRange, type DestinationLine, type SourceLine } from '../../src/reconcile/compare.js';
import { defineReconciler, type ReconcileEvent } from '../../src/reconcile/define-reconciler.js';
import { inCut, toReconcileEvent } from '../../src/reconcile/destination-events.js';
import { flatReceiptMetadata, receiptAt, receiptToMetadata } from '../../src/sink/receipt.js';
import { formatReconcileReport } from '../../src/reconcile/format.js';
import { canonicalJson, entityHash, rangeOf, RangeFiles, RangeSums } from '../../src/reconcile/ranges.js';
import { reconcilerOf } from '../../src/reconcile/spill.js';
import { mappers } from '../../examples/invoicing/index.js';

type Row = { id: string; status: string; owner: string };
type State = { status: string; owner: string } | { deleted: true };
const things = defineReconciler<Row, State>({
  table: 'public.thing',
  columns: ['id', 'status', 'owner'],
  streamPrefix: 'thing-',
  stream: (row) => `thing-${row.id}`,
  expected: (row) => ({ status: row.status, owner: row.owner }),
  fold: (state, event: ReconcileEvent) => {
    const d = event.data as { status?: string; owner?: string };
    if (event.type === 'ThingMade') return { status: 'new', owner: d.owner! };
    if (event.type === 'ThingChanged' && state && !('deleted' in state)) return { ...state, status: d.status! };
    if (event.type === 'ThingGone') return { deleted: true };
    return state;
  },
  deleted: (state) => 'deleted' in state,
  mask: ['owner'],
});
const reconcilers = [things];

const event = (stream: string, revision: number, type: string, data: object): string =>
  JSON.stringify(['e', 0, stream, revision, type, 1, data, {}] satisfies DestinationLine);
const row = (id: string, status: string, owner = 'ada'): string =>
  JSON.stringify([0, `thing-${id}`, canonicalJson({ status, owner }), { id }] satisfies SourceLine);

describe('the cut', () => {
  it("counts a transaction's events before the cut's LSN, a snapshot record's at or before it, and events without receipt always", () => {
    // The receipt in both forms: the one `receipt` property, and the flat `receipt.*` keys earlier versions wrote.
    for (const form of [receiptToMetadata, flatReceiptMetadata]) {
      const change = (commitLsn: string) => form(receiptAt({ kind: 'transaction', assembler: 'a', commitLsn, xid: 1 }, 0, 1));
      const record = (lsn: string) => form(receiptAt({ kind: 'snapshot', assembler: 'a', lsn, generation: '1', sequence: 0, table: 'public.t', key: '1' }, 0, 1));
      expect(inCut(change('0/1FF'), '0/200')).toBe(true);
      expect(inCut(change('0/200'), '0/200')).toBe(false);
      expect(inCut(record('0/200'), '0/200')).toBe(true);
      expect(inCut(record('0/201'), '0/200')).toBe(false);
      expect(inCut({ ...record('0/201'), 'source.commitLsn': '0/100' }, '0/200')).toBe(false); // the receipt, not the source position
    }
    expect(inCut({ 'source.commitLsn': '0/1FF' }, '0/200')).toBe(true);
    expect(inCut({ 'source.commitLsn': '0/200' }, '0/200')).toBe(false);
    expect(inCut({}, '0/200')).toBe(true);
  });

  it("gives the fold the receipt's kind as `receipt.kind`, whichever form the receipt was written in", () => {
    const receipt = receiptAt({ kind: 'snapshot', assembler: 'a', lsn: '0/10', generation: '1', sequence: 0, table: 'public.t', key: '1' }, 0, 1);
    for (const metadata of [receiptToMetadata(receipt), flatReceiptMetadata(receipt)]) {
      const event = toReconcileEvent('thing-1', 'ThingImported', '{}', { ...metadata, contract: 'ThingImported@1', 'source.tables': 'public.t' });
      expect(event.metadata['receipt.kind']).toBe('snapshot');
      expect(event.metadata['source.tables']).toBeUndefined(); // only what the fold and the cut read
      expect(event.version).toBe(1);
    }
    expect(toReconcileEvent('thing-1', 'ThingImported', '{}', { contract: 'ThingImported@1' }).metadata['receipt.kind']).toBeUndefined();
  });
});

describe('ranges', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('canonical JSON sorts keys at every level, so equal states hash equally whatever their key order', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, 'x'], c: null } })).toBe('{"a":{"c":null,"d":[1,"x"]},"b":1}');
    expect(canonicalJson({ a: 1, b: undefined })).toBe('{"a":1}');
    expect(entityHash('thing-1', canonicalJson({ a: 1, b: 2 }))).toBe(entityHash('thing-1', canonicalJson({ b: 2, a: 1 })));
    expect(entityHash('thing-1', canonicalJson({ a: 1 }))).not.toBe(entityHash('thing-2', canonicalJson({ a: 1 })));
  });

  it('spreads streams over ranges stably and spills lines per range in order', async () => {
    expect(rangeOf('thing-1', 7)).toBe(rangeOf('thing-1', 7));
    const counts = new Array(8).fill(0);
    for (let i = 0; i < 8000; i++) counts[rangeOf(`thing-${i}`, 8)] += 1;
    for (const c of counts) expect(c).toBeGreaterThan(800); // about 1000 each
    const dir = mkdtempSync(join(tmpdir(), 'ea-ranges-'));
    dirs.push(dir);
    const files = await RangeFiles.create(dir, 'test', 3);
    for (let i = 0; i < 30_000; i++) await files.add(i % 3, `line ${i}`);
    await files.flush();
    const lines = await files.lines(1);
    expect(lines).toHaveLength(10_000);
    expect(lines.slice(0, 2)).toEqual(['line 1', 'line 4']);
    expect(await files.lines(2)).toHaveLength(10_000);
    await files.remove();
    expect(await files.lines(0)).toEqual([]);
  });

  it('many ranges buffer at most 8 MiB in all: past it every range is written, each in the order added', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ea-ranges-'));
    dirs.push(dir);
    const ranges = 200;
    const files = await RangeFiles.create(dir, 'test', ranges);
    const pad = 'x'.repeat(250);
    // 10 MB over 200 ranges: 50 KB each, below a range's own 256 KiB threshold.
    for (let i = 0; i < 40_000; i++) await files.add(i % ranges, `${i} ${pad}`);
    for (const range of [0, 99, 199]) expect((await files.lines(range)).length).toBeGreaterThan(0);
    await files.flush();
    for (const range of [0, 99, 199]) {
      const numbers = (await files.lines(range)).map((line) => Number(line.split(' ')[0]));
      expect(numbers).toEqual(Array.from({ length: 200 }, (_, k) => range + k * ranges));
    }
    await files.remove();
  });
});

describe('one range compared', () => {
  it('folds what a stream read would show: events before $tb are hidden, a tombstone hides all', () => {
    const folded = foldRange(
      [
        event('thing-a', 0, 'ThingMade', { owner: 'ada' }),
        event('thing-a', 1, 'ThingChanged', { status: 'done' }),
        event('thing-b', 0, 'ThingMade', { owner: 'bob' }),
        event('thing-b', 1, 'ThingChanged', { status: 'done' }),
        JSON.stringify(['t', 0, 'thing-b', 1] satisfies DestinationLine), // truncated before revision 1
        event('thing-c', 0, 'ThingMade', { owner: 'cy' }),
        JSON.stringify(['x', 0, 'thing-c'] satisfies DestinationLine),
        JSON.stringify(['t', 0, 'thing-d', Number.MAX_SAFE_INTEGER] satisfies DestinationLine), // soft-deleted
        event('thing-d', 0, 'ThingMade', { owner: 'di' }),
      ],
      reconcilers,
    );
    expect(folded.get('thing-a')).toEqual({ reconciler: 0, state: { status: 'done', owner: 'ada' }, deleted: false });
    expect(folded.get('thing-b')?.state).toBeNull(); // ThingChanged alone folds to nothing
    expect(folded.get('thing-c')?.state).toBeNull();
    expect(folded.get('thing-d')?.state).toBeNull();
  });

  it('names each kind of difference, and agreeing ranges hash like the source', () => {
    const destination = [
      event('thing-same', 0, 'ThingMade', { owner: 'ada' }),
      event('thing-differs', 0, 'ThingMade', { owner: 'ada' }),
      event('thing-extra', 0, 'ThingMade', { owner: 'ada' }),
      event('thing-gone', 0, 'ThingMade', { owner: 'ada' }),
      event('thing-gone', 1, 'ThingGone', {}),
      event('thing-resurrected', 0, 'ThingMade', { owner: 'ada' }),
      event('thing-resurrected', 1, 'ThingGone', {}),
    ];
    const source = [row('same', 'new'), row('differs', 'done', 'bob'), row('missing', 'new'), row('resurrected', 'new')];
    const folded = foldRange(destination, reconcilers);
    const outcome = compareRange(source, folded, reconcilers);
    expect(outcome.missing.map((e) => e.stream)).toEqual(['thing-missing']);
    expect(outcome.extra.map((e) => e.stream)).toEqual(['thing-extra']);
    expect(outcome.deletedButAlive.map((e) => e.stream)).toEqual(['thing-resurrected']);
    expect(outcome.different).toEqual([
      { reconciler: 'public.thing', stream: 'thing-differs', key: { id: 'differs' }, fields: [{ field: 'owner', expected: '•••', actual: '•••' }, { field: 'status', expected: 'done', actual: 'new' }] },
    ]);
    expect(outcome.agreeing).toEqual([1]);

    const sums = new RangeSums(1);
    sums.add(0, entityHash('thing-same', canonicalJson({ status: 'new', owner: 'ada' })));
    const agreeing = destinationSum(foldRange([destination[0]!], reconcilers));
    expect(agreeing).toEqual({ sum: sums.sums[0], count: 1 });
    expect(destinationSum(folded).sum).not.toBe(sums.sums[0]);
  });

  it('shows values except masked fields, and lists missing fields as null', () => {
    const plain = defineReconciler({ ...things, mask: [] });
    expect(fieldDifferences(plain, { status: 'a', owner: 'x' }, { status: 'b' })).toEqual([
      { field: 'owner', expected: 'x', actual: null },
      { field: 'status', expected: 'a', actual: 'b' },
    ]);
  });

  it('assigns a stream to the reconciler with the longest matching prefix', () => {
    const lines = defineReconciler({ ...things, name: 'lines', streamPrefix: 'thing-line-' });
    expect(reconcilerOf([things, lines], 'thing-line-1')).toBe(1);
    expect(reconcilerOf([things, lines], 'thing-1')).toBe(0);
    expect(reconcilerOf([things, lines], 'other-1')).toBe(-1);
  });
});

describe('the report and the configuration', () => {
  it('prints the counts and the entities, and says agreement only when there are no differences', () => {
    const report = {
      version: 1 as const, ok: false, cut: { lsn: '0/10', checkpointLsn: '0/20', waitedMs: 5 }, sample: null, ranges: { total: 2, differing: 1 },
      summaries: [{ reconciler: 'public.thing', table: 'public.thing', rows: 3, entities: 3, agreeing: 2, missing: 0, extra: 0, different: 1, deletedButAlive: 0 }],
      missing: [], extra: [], deletedButAlive: [],
      different: [{ reconciler: 'public.thing', stream: 'thing-1', key: { id: '1' }, fields: [{ field: 'status', expected: 'done', actual: 'new' }] }],
      events: { read: 9, folded: 8 }, durationMs: 1200,
    };
    const text = formatReconcileReport(report);
    expect(text).toContain('cut 0/10 (checkpoint 0/20');
    expect(text).toContain('thing-1 (public.thing id=1): status expected done, found new');
    expect(text).toContain('differences found (exit 1)');
    expect(formatReconcileReport({ ...report, ok: true, different: [], summaries: [{ ...report.summaries[0]!, different: 0, agreeing: 3 }] })).toContain('agreement');
  });

  const config = (reconcilers: unknown[]) =>
    defineConfig({
      name: 'invoicing',
      source: { connection: 'postgres://capture@db/shop', slot: 'invoicing', publication: 'invoicing' },
      destination: { connectionString: 'kurrentdb://localhost:2113?tls=false' },
      mappers,
      contracts: { dir: 'contracts/invoicing' },
      reconcilers: reconcilers as never,
    });
  const customer = (columns: string[], name = 'customers') =>
    defineReconciler<Record<string, unknown>, Record<string, unknown>>({ name, table: 'public.customer', columns, streamPrefix: 'customer-', stream: (r) => `customer-${String(r['id'])}`, expected: (r) => r, fold: (s) => s });

  it('accepts reconcilers over allowlisted columns, and refuses a hidden column, an unread table, twins and impostors', () => {
    expect(parseConfig(config([customer(['id', 'name'])])).reconcilers.map((r) => r.name)).toEqual(['customers']);
    expect(parseConfig(config([])).reconcilers).toEqual([]);
    const problems = (reconcilersList: unknown[]) => {
      try {
        parseConfig(config(reconcilersList));
      } catch (error) {
        if (error instanceof ConfigError) return error.problems.map((p) => `${p.field}: ${p.problem}`);
        throw error;
      }
      return [];
    };
    expect(problems([customer(['id', 'email'])])).toEqual(['reconcilers.0.columns: email is not allowlisted by any mapper for public.customer']);
    expect(problems([{ ...customer(['id']), table: 'public.secret' }])).toEqual(['reconcilers.0.table: no mapper reads public.secret']);
    expect(problems([customer(['id']), customer(['id'])])).toEqual(['reconcilers.1: two reconcilers are named "customers"']);
    expect(problems([{ table: 'public.customer' }])).toEqual(['reconcilers.0: is not a reconciler']);
    expect(() => defineReconciler({ ...customer(['id']), table: 'customer' })).toThrow(/schema-qualified/);
    expect(() => defineReconciler({ ...customer(['id']), streamPrefix: '$ce-' })).toThrow(/streamPrefix/);
  });
});
