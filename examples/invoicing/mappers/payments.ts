import { defineMapper } from '../../../src/mapping/index.js';
import type { EventContracts, InvoicingTables } from './types.js';

/** InvoicePaid v1 for each payment recorded (the invoice goes issued → paid in the same transaction). */
export const payments = defineMapper<EventContracts, InvoicingTables>({
  name: 'payments',
  tables: {
    'public.payment': { columns: ['id', 'invoice_id', 'amount', 'currency', 'paid_at'] },
  },
  map: (tx) =>
    tx.inserts('public.payment').map(({ after: payment }) => ({
      stream: `invoice-${payment.invoice_id}`,
      type: 'InvoicePaid',
      version: 1,
      data: { invoiceId: payment.invoice_id, paymentId: payment.id, amount: payment.amount, currency: payment.currency, paidAt: payment.paid_at },
    })),
});
