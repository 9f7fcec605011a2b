import { defineMapper } from '../../../src/mapping/index.js';
import { declareTable, invoicingTables } from './tables.js';
import type { EventContracts, InvoicingTables } from './types.js';

/** InvoicePaid v1 for each payment recorded (the invoice goes issued → paid in the same transaction), from the tables in `schema`. */
export function createPaymentsMapper(schema = 'public') {
  const { payment } = invoicingTables(schema);
  return defineMapper<EventContracts, InvoicingTables>({
    name: 'payments',
    tables: declareTable(payment, { columns: ['id', 'invoice_id', 'amount', 'currency', 'paid_at'] }),
    map: (tx) =>
      tx.inserts(payment).map(({ after: row }) => ({
        stream: `invoice-${row.invoice_id}`,
        type: 'InvoicePaid',
        version: 1,
        data: { invoiceId: row.invoice_id, paymentId: row.id, amount: row.amount, currency: row.currency, paidAt: row.paid_at },
      })),
  });
}

/** The payments mapper for the tables in `public`. */
export const payments = createPaymentsMapper();
