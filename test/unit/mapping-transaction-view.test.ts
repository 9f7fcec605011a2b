import { describe, expect, it } from 'vitest';
import { isUnchangedToast, UNCHANGED_TOAST, type TruncateChange } from '../../src/source/types.js';
import { createStreamingView, createTransactionView, defineMapper, type Transaction } from '../../src/mapping/index.js';
import { del, insert, snapshotRecord, transaction, update } from '../../src/testing/mapper-kit.js';

const tables = defineMapper({
  name: 'view',
  tables: {
    'public.invoice': { columns: ['id', 'status', 'total', 'note'], before: ['status', 'note'] },
    'public.invoice_line': { columns: ['invoice_id', 'line_no', 'amount'] },
    'public.payment': { columns: ['id', 'amount'], before: 'key' },
  },
  map: () => [],
}).tables;

const lineKey = { key: ['invoice_id', 'line_no'] };

function view(unit: Parameters<typeof createTransactionView>[0]): Transaction {
  return createTransactionView(unit, tables).tx;
}

const issue = transaction(
  [
    insert('public.invoice_line', { invoice_id: 'inv_1', line_no: 2, amount: '5.00' }, lineKey),
    insert('public.invoice_line', { invoice_id: 'inv_1', line_no: 1, amount: '10.00' }, lineKey),
    insert('public.invoice_line', { invoice_id: 'inv_2', line_no: 1, amount: '1.00' }, lineKey),
    update('public.invoice', { id: 'inv_1', status: 'draft', total: '0.00', note: 'x' }, { id: 'inv_1', status: 'issued', total: '15.00', note: 'x' }),
    update('public.invoice', { id: 'inv_3', status: 'issued', total: '1.00', note: 'y' }, { id: 'inv_3', status: 'void', total: '1.00', note: 'y' }),
    del('public.payment', { id: 'pay_1' }),
    insert('public.customer', { id: 'c1', email: 'a@b.c' }),
  ],
  { commitLsn: '0/ABC', xid: 42, commitTime: '2026-01-15T10:00:00.000000Z' },
);

describe('Transaction view', () => {
  it('exposes the source position and commit time of a transaction', () => {
    const tx = view(issue);
    expect(tx.isSnapshot).toBe(false);
    expect(tx.snapshotGeneration).toBeNull();
    expect(tx.commitTime).toBe('2026-01-15T10:00:00.000000Z');
    expect(tx.position?.commitLsn).toBe('0/ABC');
    expect(tx.xid).toBe(42);
  });

  it('filters each change when first read, by any accessor, and hands out the same view object afterwards', () => {
    const withSecrets = transaction([
      insert('public.invoice_line', { invoice_id: 'inv_1', line_no: 1, amount: '10.00', cost_price: '7.00' }, lineKey),
      update('public.invoice', { id: 'inv_1', status: 'draft', total: '0.00', note: 'x', owner_email: 'a@b.c' }, { id: 'inv_1', status: 'issued', total: '15.00', note: 'x', owner_email: 'a@b.c' }),
    ]);
    const secrets = ['cost_price', 'owner_email'];
    const seen = (rows: readonly (object | null)[]) => rows.flatMap((row) => (row ? Object.keys(row) : []));
    // Every accessor, each first on a fresh view (the order of first reads differs), then again.
    const accessors: ((tx: Transaction) => readonly (object | null)[])[] = [
      (tx) => tx.rows('public.invoice_line'),
      (tx) => tx.related('public.invoice_line', { invoice_id: 'inv_1' }),
      (tx) => tx.updates('public.invoice').flatMap((c) => [c.after, c.before, c.key, c.oldKey]),
      (tx) => tx.transitions('public.invoice', 'status', 'draft', 'issued').flatMap((c) => [c.after, c.before]),
      (tx) => tx.changes().flatMap((c) => [c.after, c.before, c.key]),
      (tx) => tx.changes('public.invoice_line').map((c) => c.after),
    ];
    for (const first of accessors) {
      const tx = view(withSecrets);
      const rows = [...first(tx), ...accessors.flatMap((read) => read(tx))];
      expect(seen(rows).filter((column) => secrets.includes(column))).toEqual([]);
      expect(tx.changes('public.invoice')[0]).toBe(tx.updates('public.invoice')[0]);
      expect(tx.changes()[0]).toBe(tx.inserts('public.invoice_line')[0]);
      expect(tx.changes()).toBe(tx.changes());
    }
  });

  it('lists changes per table and per operation, in transaction order', () => {
    const tx = view(issue);
    expect(tx.changes().map((c) => `${c.table}:${c.op}`)).toEqual([
      'public.invoice_line:insert',
      'public.invoice_line:insert',
      'public.invoice_line:insert',
      'public.invoice:update',
      'public.invoice:update',
      'public.payment:delete',
    ]);
    expect(tx.tables).toEqual(['public.invoice_line', 'public.invoice', 'public.payment']);
    expect(tx.inserts('public.invoice_line')).toHaveLength(3);
    expect(tx.updates('public.invoice')).toHaveLength(2);
    expect(tx.deletes('public.payment').map((d) => d.key)).toEqual([{ id: 'pay_1' }]);
    expect(tx.inserts('public.invoice')).toEqual([]);
  });

  it('finds related rows written in the same transaction', () => {
    const tx = view(issue);
    const lines = tx.related('public.invoice_line', { invoice_id: 'inv_1' });
    expect(lines.map((l) => l.line_no)).toEqual([2, 1]);
    expect(tx.rows('public.invoice_line', (l) => l.amount === '1.00')).toHaveLength(1);
    expect(tx.rows('public.invoice', { status: 'issued' }).map((r) => r.id)).toEqual(['inv_1']);
  });

  it('tells status transitions apart', () => {
    const tx = view(issue);
    const [issued, voided] = tx.updates('public.invoice');
    expect(issued!.changed('status')).toBe(true);
    expect(issued!.changed('note')).toBe(false);
    expect(issued!.changedFrom('status', 'draft').to('issued')).toBe(true);
    expect(issued!.changedFrom('status', 'issued').to('issued')).toBe(false);
    expect(voided!.changedTo('status', 'void')).toBe(true);
    expect(voided!.changedFrom('status', ['draft', 'issued']).to('void')).toBe(true);
    expect(tx.transitions('public.invoice', 'status', 'draft', 'issued').map((u) => u.after.id)).toEqual(['inv_1']);
    expect(tx.transitions('public.invoice', 'status', ['draft', 'issued', 'paid'], 'void').map((u) => u.after.id)).toEqual(['inv_3']);
  });

  it('counts inserts and deletes as changes, snapshot reads as none', () => {
    const tx = view(issue);
    expect(tx.inserts('public.invoice_line')[0]!.changed('amount')).toBe(true);
    expect(tx.deletes('public.payment')[0]!.changed('id')).toBe(true);
    const created = view(transaction([insert('public.invoice', { id: 'inv_9', status: 'draft' })])).inserts('public.invoice')[0]!;
    expect(created.changedTo('status', 'draft')).toBe(true);
    expect(created.changedFrom('status', 'draft').to('draft')).toBe(false);
    const read = view(snapshotRecord('public.invoice', { id: 'inv_1', status: 'paid' })).changes()[0]!;
    expect(read.changed('status')).toBe(false);
  });

  it('explains a missing old value instead of guessing', () => {
    // Default replica identity: PostgreSQL sends no old tuple for an update that keeps the key.
    const tx = view(transaction([update('public.invoice', null, { id: 'inv_1', status: 'issued' })]));
    expect(() => tx.updates('public.invoice')[0]!.changed('status')).toThrow(/REPLICA IDENTITY FULL/);
  });

  it('refuses before-image columns the mapper did not declare', () => {
    const tx = view(transaction([update('public.invoice', { id: 'inv_1', status: 'draft', total: '1.00' }, { id: 'inv_1', status: 'draft', total: '2.00' })]));
    expect(() => tx.updates('public.invoice')[0]!.changed('total')).toThrow(/tables\['public.invoice'\].before/);
    expect(tx.updates('public.invoice')[0]!.before).toEqual({ status: 'draft' });
  });

  it('refuses undeclared tables and non-allowlisted columns', () => {
    const tx = view(issue);
    expect(() => tx.inserts('public.customer')).toThrow(/not declared/);
    expect(() => tx.rows('public.invoice', { email: 'x' })).toThrow(/not allowlisted/);
  });

  it("gives the old key with before: 'key'", () => {
    const tx = view(transaction([update('public.payment', { id: 'pay_1' }, { id: 'pay_2', amount: '1.00' })]));
    const [change] = tx.updates('public.payment');
    expect(change!.before).toEqual({ id: 'pay_1' });
    expect(change!.oldKey).toEqual({ id: 'pay_1' });
    expect(change!.changed('id')).toBe(true);
  });

  it('keeps unchanged TOAST values recognisable and unchanged', () => {
    const tx = view(transaction([update('public.invoice', { id: 'inv_1', status: 'draft', note: UNCHANGED_TOAST }, { id: 'inv_1', status: 'issued', note: UNCHANGED_TOAST })]));
    const [change] = tx.updates('public.invoice');
    expect(isUnchangedToast(change!.after.note)).toBe(true);
    expect(change!.changed('note')).toBe(false);
  });

  it('shows a snapshot record as a one-change transaction with op read', () => {
    const tx = view(snapshotRecord('public.invoice', { id: 'inv_1', status: 'paid', total: '3.00', secret: 's' }, { generation: 'g7' }));
    expect(tx.isSnapshot).toBe(true);
    expect(tx.snapshotGeneration).toBe('g7');
    expect(tx.commitTime).toBeNull();
    expect(tx.position).toBeNull();
    expect(tx.changes().map((c) => c.op)).toEqual(['read']);
    expect(tx.reads('public.invoice')[0]!.after).toEqual({ id: 'inv_1', status: 'paid', total: '3.00' });
    expect(tx.rows('public.invoice')).toHaveLength(1);
  });

  it('reports truncates of declared tables', () => {
    const truncate: TruncateChange = { op: 'truncate', tables: ['public.invoice_line', 'public.customer'], cascade: false, restartIdentity: false };
    const tx = view(transaction([truncate]));
    expect(tx.truncated('public.invoice_line')).toBe(true);
    expect(tx.truncated('public.invoice')).toBe(false);
  });

  it('is frozen', () => {
    const tx = view(issue);
    const row = tx.rows('public.invoice')[0]! as Record<string, unknown>;
    expect(() => {
      row.status = 'paid';
    }).toThrow(TypeError);
    expect(Object.isFrozen(tx.changes())).toBe(true);
  });
});

describe('tx.each(): the changes one at a time', () => {
  const views = (iterable: Iterable<{ op: string; table: string; key: unknown; after: unknown; before: unknown }>) =>
    [...iterable].map((c) => ({ op: c.op, table: c.table, key: c.key, after: c.after, before: c.before }));

  it('hands out what changes() lists, of all declared tables or of one, and can be gone over again', () => {
    const tx = view(issue);
    expect(views(tx.each())).toEqual(views(tx.changes()));
    const lines = tx.each('public.invoice_line');
    expect(views(lines)).toEqual(views(tx.changes('public.invoice_line')));
    expect(views(lines)).toHaveLength(3); // a second pass over the same iterable
    expect(() => tx.each('public.customer')).toThrow(/not declared/);
  });

  it('on a transaction whose changes are a sequence (read from disk), lists nothing: the same views, made as they are pulled', () => {
    let pulled = 0;
    const sequence = {
      length: issue.changes.length,
      *[Symbol.iterator]() {
        for (const change of issue.changes) {
          pulled += 1;
          yield change;
        }
      },
    };
    const tx = createStreamingView({ ...issue, changes: sequence }, tables);
    const first = tx.each('public.invoice_line')[Symbol.iterator]().next();
    expect(first.value?.key).toEqual({ invoice_id: 'inv_1', line_no: 2 });
    expect(pulled).toBe(1);
    expect(views(tx.each())).toEqual(views(view(issue).changes()));
    expect(tx.tables).toEqual(view(issue).tables);
    expect(tx.truncated('public.invoice')).toBe(false);
  });
});
