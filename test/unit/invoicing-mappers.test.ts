import { describe, expect, it } from 'vitest';
import { customers, invoiceImport, invoiceLifecycle, mappers, payments } from '../../examples/invoicing/index.js';
import { mapUnit } from '../../src/mapping/index.js';
import { del, insert, mapperSpec, snapshotRecord, transaction, update } from '../../src/testing/mapper-kit.js';

const lineKey = { key: ['invoice_id', 'line_no'] };
const draft = {
  id: 'inv_1',
  customer_id: 'c1',
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
const issued = { ...draft, number: 'INV-1042', status: 'issued', total: '135.00', issued_at: '2026-01-15T10:00:00.000000Z', due_date: '2026-02-14' };
const line = (line_no: number, description: string, quantity: number, unit_price: string, amount: string) =>
  insert('public.invoice_line', { invoice_id: 'inv_1', line_no, description, quantity, unit_price, amount }, lineKey);

describe('customers', () => {
  it('CustomerRegistered on insert, without email or card number', () => {
    mapperSpec(customers)
      .when([insert('public.customer', { id: 'c1', name: 'Ada', email: 'ada@example.com', card_number: '4111111111111111', country: 'GB' })])
      .then([{ stream: 'customer-c1', type: 'CustomerRegistered', version: 1, data: { customerId: 'c1', name: 'Ada', country: 'GB' } }]);
  });

  it('nothing on a customer update or delete', () => {
    const row = { id: 'c1', name: 'Ada', email: 'a@b.c', country: 'GB' };
    mapperSpec(customers).when([update('public.customer', null, row), del('public.customer', { id: 'c1' })]).thenNothing();
  });
});

describe('invoice lifecycle', () => {
  it('InvoiceDrafted on insert with status draft', () => {
    mapperSpec(invoiceLifecycle)
      .when([insert('public.invoice', draft)])
      .then([{ stream: 'invoice-inv_1', type: 'InvoiceDrafted', version: 1, data: { invoiceId: 'inv_1', customerId: 'c1', currency: 'EUR' } }]);
  });

  it('InvoiceIssued v2 from the draft→issued transition and the lines of the same transaction, ordered by line number', () => {
    mapperSpec(invoiceLifecycle)
      .when(
        transaction([
          line(2, 'Support', 1, '35.00', '35.00'),
          line(1, 'Licence', 2, '50.00', '100.00'),
          insert('public.invoice_line', { invoice_id: 'inv_2', line_no: 1, description: 'Other invoice', quantity: 1, unit_price: '1.00', amount: '1.00' }, lineKey),
          update('public.invoice', draft, issued),
        ]),
      )
      .then([
        {
          stream: 'invoice-inv_1',
          type: 'InvoiceIssued',
          version: 2,
          data: {
            invoiceId: 'inv_1',
            customerId: 'c1',
            number: 'INV-1042',
            total: { amount: '135.00', currency: 'EUR' },
            issuedAt: '2026-01-15T10:00:00.000000Z',
            dueDate: '2026-02-14',
            lines: [
              { lineNo: 1, description: 'Licence', quantity: 2, unitPrice: '50.00', amount: '100.00' },
              { lineNo: 2, description: 'Support', quantity: 1, unitPrice: '35.00', amount: '35.00' },
            ],
          },
          metadata: { contract: 'InvoiceIssued@2', 'source.tables': 'public.invoice,public.invoice_line', 'source.operations': 'insert,update' },
        },
      ]);
  });

  it('issuedAt falls back to the commit time when issued_at is not set', () => {
    mapperSpec(invoiceLifecycle)
      .when(
        transaction([line(1, 'Licence', 1, '10.00', '10.00'), update('public.invoice', draft, { ...issued, total: '10.00', issued_at: null, due_date: null })], {
          commitTime: '2026-01-16T08:00:00.000000Z',
        }),
      )
      .then([
        {
          stream: 'invoice-inv_1',
          type: 'InvoiceIssued',
          version: 2,
          data: {
            invoiceId: 'inv_1',
            customerId: 'c1',
            number: 'INV-1042',
            total: { amount: '10.00', currency: 'EUR' },
            issuedAt: '2026-01-16T08:00:00.000000Z',
            dueDate: null,
            lines: [{ lineNo: 1, description: 'Licence', quantity: 1, unitPrice: '10.00', amount: '10.00' }],
          },
        },
      ]);
  });

  it('fails loudly when an invoice is issued without its lines in the transaction', () => {
    mapperSpec(invoiceLifecycle).when([update('public.invoice', draft, issued)]).thenThrows(/issued without its lines/);
  });

  it('fails loudly when the table does not send old values (REPLICA IDENTITY not FULL)', () => {
    mapperSpec(invoiceLifecycle).when([update('public.invoice', null, issued)]).thenThrows('REPLICA IDENTITY FULL');
  });

  it('InvoiceVoided with the commit time on any status → void', () => {
    mapperSpec(invoiceLifecycle)
      .when(transaction([update('public.invoice', issued, { ...issued, status: 'void', void_reason: 'duplicate' })], { commitTime: '2026-01-20T12:00:00.000000Z' }))
      .then([{ stream: 'invoice-inv_1', type: 'InvoiceVoided', version: 1, data: { invoiceId: 'inv_1', reason: 'duplicate', voidedAt: '2026-01-20T12:00:00.000000Z' } }]);
  });

  it('InvoiceDiscarded with the commit time when a draft is deleted', () => {
    mapperSpec(invoiceLifecycle)
      .when(transaction([del('public.invoice', draft)], { commitTime: '2026-01-18T16:45:00.000000Z' }))
      .then([{ stream: 'invoice-inv_1', type: 'InvoiceDiscarded', version: 1, data: { invoiceId: 'inv_1', discardedAt: '2026-01-18T16:45:00.000000Z' } }]);
  });

  it('nothing when an invoice that was not a draft is deleted', () => {
    mapperSpec(invoiceLifecycle).when([del('public.invoice', issued)]).thenNothing();
  });

  it('fails loudly when a delete carries only the key (REPLICA IDENTITY not FULL)', () => {
    mapperSpec(invoiceLifecycle).when([del('public.invoice', { id: 'inv_1' })]).thenThrows('REPLICA IDENTITY FULL');
  });

  it('nothing for other updates, or for snapshot records', () => {
    mapperSpec(invoiceLifecycle).when([update('public.invoice', issued, { ...issued, total: '140.00' })]).thenNothing();
    mapperSpec(invoiceLifecycle).when(snapshotRecord('public.invoice', issued)).thenNothing();
  });
});

describe('payments', () => {
  it('InvoicePaid on payment insert (with the invoice going issued → paid)', () => {
    mapperSpec(payments)
      .when([
        insert('public.payment', { id: 'pay_1', invoice_id: 'inv_1', amount: '135.00', currency: 'EUR', paid_at: '2026-01-25T09:30:00.000000Z' }),
        update('public.invoice', issued, { ...issued, status: 'paid' }),
      ])
      .then([
        {
          stream: 'invoice-inv_1',
          type: 'InvoicePaid',
          version: 1,
          data: { invoiceId: 'inv_1', paymentId: 'pay_1', amount: '135.00', currency: 'EUR', paidAt: '2026-01-25T09:30:00.000000Z' },
        },
      ]);
  });
});

describe('invoice import (snapshot)', () => {
  it('InvoiceImported for each snapshot record of invoice', () => {
    mapperSpec(invoiceImport)
      .when(snapshotRecord('public.invoice', issued, { generation: 'g1' }))
      .then([
        {
          stream: 'invoice-inv_1',
          type: 'InvoiceImported',
          version: 1,
          data: { invoiceId: 'inv_1', customerId: 'c1', status: 'issued', currency: 'EUR', total: '135.00' },
          metadata: { origin: 'snapshot', 'snapshot.generation': 'g1' },
        },
      ]);
  });

  it('nothing for change transactions', () => {
    mapperSpec(invoiceImport).when([insert('public.invoice', draft)]).thenNothing();
  });
});

describe('all invoicing mappers together', () => {
  it('one transaction that pays an invoice: every event shares the transaction identity and count', () => {
    const context = { assembler: 'invoicing', sourceIdentity: '7000000000000000001' };
    const unit = transaction([
      insert('public.customer', { id: 'c2', name: 'Grace', email: 'g@example.com', country: 'US' }),
      insert('public.invoice', { ...draft, id: 'inv_2', customer_id: 'c2' }),
      insert('public.payment', { id: 'pay_9', invoice_id: 'inv_1', amount: '1.00', currency: 'EUR', paid_at: '2026-01-25T09:30:00.000000Z' }),
    ]);
    const { events, failed } = mapUnit(mappers, unit, context);
    expect(failed).toEqual([]);
    expect(events.map((e) => `${e.type}@${e.version} ${e.stream} ${e.metadata['transaction.index']}/${e.metadata['transaction.count']}`)).toEqual([
      'CustomerRegistered@1 customer-c2 0/3',
      'InvoiceDrafted@1 invoice-inv_2 1/3',
      'InvoicePaid@1 invoice-inv_1 2/3',
    ]);
    expect(new Set(events.map((e) => e.metadata['$correlationId']))).toEqual(new Set(['7000000000000000001:0/16B3748:1000']));
  });
});
