import { defineMapper } from '../../../src/mapping/index.js';
import { declareTable, invoicingTables } from './tables.js';
import type { EventContracts, InvoicingTables } from './types.js';

/**
 * InvoiceImported v1 for each invoice read by a snapshot: the starting state of invoices that
 * existed before capture began. Parks failures (one odd historical row should not stop an import).
 */
export function createInvoiceImportMapper(schema = 'public') {
  const { invoice } = invoicingTables(schema);
  return defineMapper<EventContracts, InvoicingTables>({
    name: 'invoice-import',
    onError: 'park',
    tables: declareTable(invoice, { columns: ['id', 'customer_id', 'status', 'currency', 'total'] }),
    map: (tx) =>
      tx.isSnapshot
        ? tx.reads(invoice).map(({ after: row }) => ({
            stream: `invoice-${row.id}`,
            type: 'InvoiceImported',
            version: 1,
            data: { invoiceId: row.id, customerId: row.customer_id, status: row.status, currency: row.currency, total: row.total },
          }))
        : [],
  });
}

/** The invoice-import mapper for the tables in `public`. */
export const invoiceImport = createInvoiceImportMapper();
