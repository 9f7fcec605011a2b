import { defineMapper, type DeleteView, type EventFor } from '../../../src/mapping/index.js';
import { declareTable, invoicingTables } from './tables.js';
import type { EventContracts, InvoiceLineRow, InvoiceRow, InvoiceStatus, InvoicingTables } from './types.js';

type InvoiceEvent = EventFor<EventContracts>;

/**
 * The invoice's life as business events, from status transitions:
 * - insert with status `draft` → InvoiceDrafted v1;
 * - update `draft` → `issued` → InvoiceIssued v2, with the lines the application inserted in
 *   the same transaction (it issues an invoice by writing its lines and flipping the status at once);
 * - update to `void` → InvoiceVoided v1 (voidedAt = commit time);
 * - delete of a row whose old status was `draft` → InvoiceDiscarded v1 (discardedAt = commit
 *   time). The application deletes only drafts; a delete of any other invoice makes no event.
 *
 * Needs the old `status` of updates and deletes (REPLICA IDENTITY FULL on invoice). Snapshot records are left to `invoice-import`.
 * Made for the tables in `schema` (default `public`).
 */
export function createInvoiceLifecycleMapper(schema = 'public') {
  const { invoice, invoiceLine } = invoicingTables(schema);
  return defineMapper<EventContracts, InvoicingTables>({
    name: 'invoice-lifecycle',
    tables: {
      ...declareTable(invoice, {
        columns: ['id', 'customer_id', 'number', 'status', 'currency', 'total', 'issued_at', 'due_date', 'void_reason'],
        before: ['status'],
      }),
      ...declareTable(invoiceLine, { columns: ['invoice_id', 'line_no', 'description', 'quantity', 'unit_price', 'amount'] }),
    },
    map(tx) {
      if (tx.isSnapshot) return [];
      const events: InvoiceEvent[] = [];
      for (const change of tx.changes(invoice)) {
        const row = change.after;
        if (change.op === 'insert' && row?.status === 'draft') {
          events.push({
            stream: `invoice-${row.id}`,
            type: 'InvoiceDrafted',
            version: 1,
            data: { invoiceId: row.id, customerId: row.customer_id, currency: row.currency },
          });
        } else if (change.op === 'update' && change.changedFrom('status', 'draft').to('issued')) {
          events.push(invoiceIssued(change.after, tx.related(invoiceLine, { invoice_id: change.after.id }), tx.commitTime));
        } else if (change.op === 'update' && change.changedTo('status', 'void')) {
          events.push({
            stream: `invoice-${change.after.id}`,
            type: 'InvoiceVoided',
            version: 1,
            data: { invoiceId: change.after.id, reason: change.after.void_reason, voidedAt: tx.commitTime },
          });
        } else if (change.op === 'delete') {
          const deleted = deletedInvoice(change);
          if (deleted.status === 'draft') {
            events.push({ stream: `invoice-${deleted.id}`, type: 'InvoiceDiscarded', version: 1, data: { invoiceId: deleted.id, discardedAt: tx.commitTime } });
          }
        }
      }
      return events;
    },
  });
}

/** The invoice-lifecycle mapper for the tables in `public`. */
export const invoiceLifecycle = createInvoiceLifecycleMapper();

/** The id and old status of a deleted invoice. */
function deletedInvoice(change: DeleteView<InvoiceRow>): { readonly id: string; readonly status: InvoiceStatus } {
  const id = change.key.id;
  const status = change.before?.status;
  // Loud rather than no event: without the old status a discarded draft cannot be told from
  // another delete, and silently dropping it would leave the stream claiming a live draft.
  if (id === undefined || status === undefined) {
    throw new Error(`a delete of ${change.table} came without the row's old status; the table needs REPLICA IDENTITY FULL`);
  }
  return { id, status };
}

function invoiceIssued(invoice: InvoiceRow, lines: readonly InvoiceLineRow[], commitTime: string): InvoiceEvent {
  if (lines.length === 0) {
    // Loud rather than an InvoiceIssued without lines: the lines must come in the issuing transaction.
    throw new Error(`invoice ${invoice.id} was issued without its lines in the same transaction`);
  }
  if (invoice.number === null) throw new Error(`invoice ${invoice.id} was issued without a number`);
  return {
    stream: `invoice-${invoice.id}`,
    type: 'InvoiceIssued',
    version: 2,
    data: {
      invoiceId: invoice.id,
      customerId: invoice.customer_id,
      number: invoice.number,
      total: { amount: invoice.total, currency: invoice.currency },
      issuedAt: invoice.issued_at ?? commitTime,
      dueDate: invoice.due_date,
      lines: [...lines]
        .sort((a, b) => a.line_no - b.line_no)
        .map((line) => ({
          lineNo: line.line_no,
          description: line.description,
          quantity: line.quantity,
          unitPrice: line.unit_price,
          amount: line.amount,
        })),
    },
  };
}
