// The invoicing example's reconcilers: the folds event by event (given/when/then), the state a
// row implies, and — through the example's real mappers — that the streams the mappers write and
// the state their events fold to are what the reconcilers expect of the same rows.
import { describe, expect, it } from 'vitest';
import { createInvoicingMappers, createInvoicingReconcilers, reconcilers, type InvoiceState } from '../../examples/invoicing/index.js';
import { mapUnit, type EventToAppend } from '../../src/mapping/index.js';
import type { AnyReconciler, ReconcileEvent } from '../../src/reconcile/define-reconciler.js';
import { del, insert, snapshotRecord, transaction, update } from '../../src/testing/mapper-kit.js';
import type { Change, Row, SourceUnit } from '../../src/source/types.js';

const [invoices, customers] = reconcilers;

const event = (type: string, data: unknown, version: number | null = 1, stream = 'invoice-inv_1'): ReconcileEvent => ({ stream, type, version, data, metadata: {} });

/** given: events already folded (from no state); when: one more; then: the state. */
function foldSpec(reconciler: AnyReconciler) {
  return {
    given: (...history: ReconcileEvent[]) => ({
      when: (next: ReconcileEvent) => {
        const before = history.reduce<unknown>((state, e) => reconciler.fold(state, e), null);
        const after = reconciler.fold(before, next);
        return {
          then: (expected: unknown) => expect(after).toEqual(expected),
          thenUnchanged: () => expect(after).toBe(before),
          thenDeleted: () => expect(after !== null && reconciler.deleted!(after)).toBe(true),
        };
      },
    }),
  };
}

const drafted = event('InvoiceDrafted', { invoiceId: 'inv_1', customerId: 'cus_1', currency: 'EUR' });
const issuedV2 = event(
  'InvoiceIssued',
  { invoiceId: 'inv_1', customerId: 'cus_1', number: 'INV-1', total: { amount: '135.00', currency: 'EUR' }, issuedAt: '2026-01-15T10:00:00Z', dueDate: '2026-02-14', lines: [] },
  2,
);
const issuedV1Data = { invoiceId: 'inv_1', customerId: 'cus_1', number: 'INV-1', currency: 'SEK', total: '1000.01', issuedAt: '2026-01-15T10:00:00Z', lines: [] };
const paid = event('InvoicePaid', { invoiceId: 'inv_1', paymentId: 'pay_1', amount: '135.00', currency: 'EUR', paidAt: '2026-01-20T10:00:00Z' });
const voided = event('InvoiceVoided', { invoiceId: 'inv_1', reason: 'duplicate', voidedAt: '2026-01-20T12:00:00Z' });
const discarded = event('InvoiceDiscarded', { invoiceId: 'inv_1', discardedAt: '2026-01-18T16:45:00Z' });
const imported = (status: string, total: string) => event('InvoiceImported', { invoiceId: 'inv_1', customerId: 'cus_9', status, currency: 'USD', total });

describe('invoices reconciler: fold', () => {
  const spec = foldSpec(invoices);

  it('InvoiceImported sets customer, status, currency and total from the snapshot record', () => {
    spec.given().when(imported('paid', '50.00')).then({ customerId: 'cus_9', status: 'paid', currency: 'USD', total: '50.00' });
  });

  it('InvoiceImported replaces what came before (a snapshot record is state, not a change)', () => {
    spec.given(drafted, voided).when(imported('issued', '20.00')).then({ customerId: 'cus_9', status: 'issued', currency: 'USD', total: '20.00' });
  });

  it('InvoiceDrafted: a draft with the column default total 0.00', () => {
    spec.given().when(drafted).then({ customerId: 'cus_1', status: 'draft', currency: 'EUR', total: '0.00' });
  });

  it('InvoiceIssued v2: issued, total and currency from total: { amount, currency }', () => {
    spec.given(drafted).when(issuedV2).then({ customerId: 'cus_1', status: 'issued', currency: 'EUR', total: '135.00' });
  });

  it('InvoiceIssued v1 (stored before v2): total and currency side by side', () => {
    spec.given(drafted).when(event('InvoiceIssued', issuedV1Data, 1)).then({ customerId: 'cus_1', status: 'issued', currency: 'SEK', total: '1000.01' });
  });

  it('InvoiceIssued without a contract version: read by its shape', () => {
    spec.given(drafted).when(event('InvoiceIssued', issuedV1Data, null)).then({ customerId: 'cus_1', status: 'issued', currency: 'SEK', total: '1000.01' });
    spec.given(drafted).when({ ...issuedV2, version: null }).then({ customerId: 'cus_1', status: 'issued', currency: 'EUR', total: '135.00' });
  });

  it('InvoicePaid: paid, the rest as it was', () => {
    spec.given(drafted, issuedV2).when(paid).then({ customerId: 'cus_1', status: 'paid', currency: 'EUR', total: '135.00' });
  });

  it('InvoiceVoided: void, the rest as it was (a voided draft keeps its 0.00)', () => {
    spec.given(drafted, issuedV2).when(voided).then({ customerId: 'cus_1', status: 'void', currency: 'EUR', total: '135.00' });
    spec.given(drafted).when(voided).then({ customerId: 'cus_1', status: 'void', currency: 'EUR', total: '0.00' });
  });

  it('InvoiceDiscarded: deleted', () => {
    spec.given(drafted).when(discarded).thenDeleted();
    expect(invoices.deleted!({ customerId: 'cus_1', status: 'draft', currency: 'EUR', total: '0.00' })).toBe(false);
  });

  it('a status change on a stream that never created the invoice, or discarded it, changes nothing', () => {
    spec.given().when(paid).then(null);
    spec.given(drafted, discarded).when(voided).thenDeleted();
  });

  it('an event type it does not know leaves the state unchanged', () => {
    spec.given(drafted, issuedV2).when(event('InvoiceReminderSent', { invoiceId: 'inv_1' })).thenUnchanged();
    spec.given().when(event('CustomerRegistered', { customerId: 'c1', name: 'Ada', country: 'GB' })).thenUnchanged();
  });
});

describe('customers reconciler: fold', () => {
  const spec = foldSpec(customers);
  const registered = event('CustomerRegistered', { customerId: 'cus_1', name: 'Ada Lovelace', country: 'GB' }, 1, 'customer-cus_1');

  it('CustomerRegistered sets name and country', () => {
    spec.given().when(registered).then({ name: 'Ada Lovelace', country: 'GB' });
  });

  it('any other event leaves the state unchanged; never deleted', () => {
    spec.given(registered).when(event('CustomerRenamed', { customerId: 'cus_1', name: 'Ada King' }, 1, 'customer-cus_1')).thenUnchanged();
    expect(customers.deleted).toBeUndefined();
  });
});

describe('invoicing reconcilers: rows', () => {
  it('read only allowlisted columns, never email or card_number; customers mask the name', () => {
    expect(invoices.table).toBe('public.invoice');
    expect(customers.table).toBe('public.customer');
    expect(customers.columns).toEqual(['id', 'name', 'country']);
    expect(customers.mask).toEqual(['name']);
    const mappers = createInvoicingMappers('billing');
    for (const reconciler of createInvoicingReconcilers('billing')) {
      expect(reconciler.table.startsWith('billing.')).toBe(true);
      for (const column of reconciler.columns) expect(mappers.some((m) => m.tables[reconciler.table]?.columns.includes(column)), `${reconciler.table}.${column}`).toBe(true);
    }
  });

  it('expected: the state a row implies, total as the decimal string PostgreSQL prints', () => {
    expect(invoices.expected({ id: 'inv_1', customer_id: 'cus_1', status: 'issued', currency: 'EUR', total: '123.40' })).toEqual({
      customerId: 'cus_1',
      status: 'issued',
      currency: 'EUR',
      total: '123.40',
    });
    expect(customers.expected({ id: 'cus_1', name: 'Ada Lovelace', country: 'GB' })).toEqual({ name: 'Ada Lovelace', country: 'GB' });
  });
});

// ── Through the example's mappers ───────────────────────────────────────────────────────────

const mappers = createInvoicingMappers();
const context = { assembler: 'test', sourceIdentity: '7000000000000000001' };
const asRecorded = (e: EventToAppend): ReconcileEvent => ({ stream: e.stream, type: e.type, version: e.version, data: e.data, metadata: e.metadata });

/** Maps each unit with every invoicing mapper; the events as reconcile reads them. */
function mapped(...units: SourceUnit[]): ReconcileEvent[] {
  return units.flatMap((unit) => {
    const { events, failed } = mapUnit(mappers, unit, context);
    expect(failed).toEqual([]);
    return events.map(asRecorded);
  });
}
const tx = (changes: Change[], i: number) => transaction(changes, { commitLsn: `0/${(0x2000 + i * 0x100).toString(16).toUpperCase()}`, xid: 5000 + i });

const customerRow: Row = { id: 'cus_1', name: 'Ada Lovelace', email: 'ada@example.com', card_number: '4111111111111111', country: 'GB', created_at: '2026-01-15T09:00:00.000000Z' };
const draftRow: Row = {
  id: 'inv_1',
  customer_id: 'cus_1',
  number: null,
  status: 'draft',
  currency: 'EUR',
  total: '0.00',
  issued_at: null,
  due_date: null,
  void_reason: null,
  created_at: '2026-01-15T09:00:00.000000Z',
  updated_at: '2026-01-15T09:00:00.000000Z',
};
const issuedRow: Row = { ...draftRow, number: 'INV-1', status: 'issued', total: '135.00', issued_at: '2026-01-15T10:00:00.000000Z', due_date: '2026-02-14' };
const paidRow: Row = { ...issuedRow, status: 'paid' };
const lines = [
  insert('public.invoice_line', { invoice_id: 'inv_1', line_no: 1, description: 'Licence', quantity: 2, unit_price: '50.00', amount: '100.00' }, { key: ['invoice_id', 'line_no'] }),
  insert('public.invoice_line', { invoice_id: 'inv_1', line_no: 2, description: 'Support', quantity: 1, unit_price: '35.00', amount: '35.00' }, { key: ['invoice_id', 'line_no'] }),
];

/** What the reconciler expects of a source row (rows come untyped from PostgreSQL, as here). */
const expectedOf = (reconciler: AnyReconciler, row: Row): unknown => reconciler.expected(row);

/** The entity's state after the events on the stream the reconciler names for `row`, folded as `reconcile` folds them. */
function folded(reconciler: AnyReconciler, row: Row, events: readonly ReconcileEvent[]): unknown {
  const stream = reconciler.stream(row);
  expect(stream.startsWith(reconciler.streamPrefix)).toBe(true);
  const own = events.filter((e) => e.stream === stream);
  expect(own.length, `events on ${stream}`).toBeGreaterThan(0);
  return own.reduce<unknown>((state, e) => reconciler.fold(state, e), null);
}

describe('invoicing reconcilers agree with the mappers', () => {
  it('a registered customer: the stream the customers mapper writes folds to what the row implies', () => {
    const events = mapped(tx([insert('public.customer', customerRow)], 0));
    expect(folded(customers, customerRow, events)).toEqual(expectedOf(customers, customerRow));
  });

  it('an invoice drafted, issued, paid: after each transaction the stream folds to what the row implies', () => {
    const history: [SourceUnit, Row][] = [
      [tx([insert('public.invoice', draftRow)], 1), draftRow],
      [tx([...lines, update('public.invoice', draftRow, issuedRow)], 2), issuedRow],
      [tx([insert('public.payment', { id: 'pay_1', invoice_id: 'inv_1', amount: '135.00', currency: 'EUR', paid_at: '2026-01-20T10:00:00.000000Z' }), update('public.invoice', issuedRow, paidRow)], 3), paidRow],
    ];
    for (let i = 1; i <= history.length; i++) {
      const row = history[i - 1]![1];
      expect(folded(invoices, row, mapped(...history.slice(0, i).map(([unit]) => unit))), `after transaction ${i}`).toEqual(expectedOf(invoices, row));
    }
  });

  it('a voided invoice, and one read by a snapshot', () => {
    const voidRow: Row = { ...issuedRow, status: 'void', void_reason: 'duplicate' };
    const events = mapped(tx([insert('public.invoice', draftRow)], 1), tx([...lines, update('public.invoice', draftRow, issuedRow)], 2), tx([update('public.invoice', issuedRow, voidRow)], 3));
    expect(folded(invoices, voidRow, events)).toEqual(expectedOf(invoices, voidRow));
    expect(folded(invoices, paidRow, mapped(snapshotRecord('public.invoice', paidRow)))).toEqual(expectedOf(invoices, paidRow));
  });

  it('a discarded draft: its stream folds to deleted', () => {
    const state = folded(invoices, draftRow, mapped(tx([insert('public.invoice', draftRow)], 1), tx([del('public.invoice', draftRow)], 2))) as InvoiceState;
    expect(invoices.deleted!(state)).toBe(true);
  });
});
