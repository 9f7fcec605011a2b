// The `invoices` projection: one row per invoice with its status and an outstanding balance kept
// by increments — the kit applies each event once, so `outstanding + x` is safe under replays.
import type pg from 'pg';
import { defineProjection, type Projection } from '../../../src/consumer/index.js';
import type { LatestEventContracts } from '../contracts.generated.js';
import { inScope, tableIn, type InvoicingProjectionOptions } from './options.js';

export const INVOICES_TABLE = 'invoices';

async function setup(client: pg.ClientBase, schema: string): Promise<void> {
  // numeric, never floating point: money adds up to the cent.
  await client.query(`CREATE TABLE IF NOT EXISTS ${tableIn(schema, INVOICES_TABLE)} (
    invoice_id  text PRIMARY KEY,
    customer_id text NOT NULL,
    number      text,
    status      text NOT NULL CHECK (status IN ('draft', 'issued', 'paid', 'void')),
    currency    text NOT NULL,
    total       numeric(14,2) NOT NULL DEFAULT 0,
    paid        numeric(14,2) NOT NULL DEFAULT 0,
    outstanding numeric(14,2) NOT NULL DEFAULT 0)`);
}

function found(result: pg.QueryResult, type: string, invoiceId: string): void {
  // An invoice the projection never saw created: halt (the kit's default) rather than lose the effect.
  if (result.rowCount !== 1) throw new Error(`${type} for invoice ${invoiceId}, which the invoices projection does not hold`);
}

/**
 * Invoices with status, total, paid and outstanding (`numeric`):
 * - `InvoiceDrafted` creates the row (status draft, nothing owed);
 * - `InvoiceImported` (a snapshot record) sets the row to the state it read: `issued` owes the
 *   total, `paid` is counted as paid in full (the import reads invoices, not payments, and in
 *   this domain a payment settles the whole total), `draft` and `void` owe nothing;
 * - `InvoiceIssued` (v2; v1 upcast by the runner's contracts) adds the total to `outstanding`;
 * - `InvoicePaid` subtracts its amount from `outstanding` and adds it to `paid`;
 * - `InvoiceVoided` sets status void and `outstanding` to 0: voiding cancels the invoice, so
 *   nothing is owed on it any more; payments already received stay in `paid`;
 * - `InvoiceDiscarded` removes the row (only drafts are discarded: nothing was owed or paid) and
 *   is a delete for the kit, whose tombstone keeps a replayed older event from bringing it back.
 */
export function createInvoicesProjection(options: InvoicingProjectionOptions = {}): Projection<LatestEventContracts> {
  const mine = (invoiceId: string) => inScope(options, invoiceId);
  return defineProjection<LatestEventContracts>({
    name: 'invoices',
    from: { categories: ['invoice'] },
    ...(options.batchSize ? { batchSize: options.batchSize } : {}),
    deletes: ['InvoiceDiscarded'],
    setup,
    handlers: {
      InvoiceDrafted: async ({ data }, { client, schema }) => {
        if (!mine(data.invoiceId)) return;
        await client.query(`INSERT INTO ${tableIn(schema, INVOICES_TABLE)} (invoice_id, customer_id, status, currency) VALUES ($1, $2, 'draft', $3) ON CONFLICT (invoice_id) DO NOTHING`, [
          data.invoiceId,
          data.customerId,
          data.currency,
        ]);
      },
      InvoiceImported: async ({ data }, { client, schema }) => {
        if (!mine(data.invoiceId)) return;
        await client.query(
          `INSERT INTO ${tableIn(schema, INVOICES_TABLE)} AS i (invoice_id, customer_id, status, currency, total, paid, outstanding)
           VALUES ($1, $2, $3, $4, $5::numeric, CASE WHEN $3 = 'paid' THEN $5::numeric ELSE 0 END, CASE WHEN $3 = 'issued' THEN $5::numeric ELSE 0 END)
           ON CONFLICT (invoice_id) DO UPDATE SET customer_id = EXCLUDED.customer_id, status = EXCLUDED.status, currency = EXCLUDED.currency,
             total = EXCLUDED.total, paid = EXCLUDED.paid, outstanding = EXCLUDED.outstanding`,
          [data.invoiceId, data.customerId, data.status, data.currency, data.total],
        );
      },
      InvoiceIssued: async ({ data }, { client, schema }) => {
        if (!mine(data.invoiceId)) return;
        await client.query(
          `INSERT INTO ${tableIn(schema, INVOICES_TABLE)} AS i (invoice_id, customer_id, number, status, currency, total, outstanding)
           VALUES ($1, $2, $3, 'issued', $4, $5::numeric, $5::numeric)
           ON CONFLICT (invoice_id) DO UPDATE SET number = EXCLUDED.number, status = 'issued', currency = EXCLUDED.currency,
             total = EXCLUDED.total, outstanding = i.outstanding + EXCLUDED.total`,
          [data.invoiceId, data.customerId, data.number, data.total.currency, data.total.amount],
        );
      },
      InvoicePaid: async ({ type, data }, { client, schema }) => {
        if (!mine(data.invoiceId)) return;
        const result = await client.query(
          `UPDATE ${tableIn(schema, INVOICES_TABLE)} SET status = 'paid', paid = paid + $2::numeric, outstanding = outstanding - $2::numeric WHERE invoice_id = $1`,
          [data.invoiceId, data.amount],
        );
        found(result, type, data.invoiceId);
      },
      InvoiceVoided: async ({ type, data }, { client, schema }) => {
        if (!mine(data.invoiceId)) return;
        const result = await client.query(`UPDATE ${tableIn(schema, INVOICES_TABLE)} SET status = 'void', outstanding = 0 WHERE invoice_id = $1`, [data.invoiceId]);
        found(result, type, data.invoiceId);
      },
      InvoiceDiscarded: async ({ type, data }, { client, schema }) => {
        if (!mine(data.invoiceId)) return;
        const result = await client.query(`DELETE FROM ${tableIn(schema, INVOICES_TABLE)} WHERE invoice_id = $1`, [data.invoiceId]);
        found(result, type, data.invoiceId);
      },
    },
  });
}
