import { defineMapper } from '../../../src/mapping/index.js';
import type { EventContracts, InvoicingTables } from './types.js';

/**
 * InvoiceImported v1 for each invoice read by a snapshot: the starting state of invoices that
 * existed before capture began. Parks failures (one odd historical row should not stop an import).
 */
export const invoiceImport = defineMapper<EventContracts, InvoicingTables>({
  name: 'invoice-import',
  onError: 'park',
  tables: {
    'public.invoice': { columns: ['id', 'customer_id', 'status', 'currency', 'total'] },
  },
  map: (tx) =>
    tx.isSnapshot
      ? tx.reads('public.invoice').map(({ after: invoice }) => ({
          stream: `invoice-${invoice.id}`,
          type: 'InvoiceImported',
          version: 1,
          data: { invoiceId: invoice.id, customerId: invoice.customer_id, status: invoice.status, currency: invoice.currency, total: invoice.total },
        }))
      : [],
});
