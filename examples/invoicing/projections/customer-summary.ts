// The `customerSummary` projection: per customer, how many invoices, the total issued, the total
// paid and what is outstanding — all kept by increments. Payments and voids name only their
// invoice, so the projection keeps its own invoice → customer table (it never reads another
// projection's tables: those move on their own checkpoint).
import type pg from 'pg';
import { defineProjection, type Projection, type ProjectionContext } from '../../../src/consumer/index.js';
import type { LatestEventContracts } from '../contracts.generated.js';
import { inScope, tableIn, type InvoicingProjectionOptions } from './options.js';

export const CUSTOMER_SUMMARY_TABLE = 'customer_summary';
/** The invoices the summary has counted, with what each contributes. */
export const CUSTOMER_SUMMARY_INVOICES_TABLE = 'customer_summary_invoices';

async function setup(client: pg.ClientBase, schema: string): Promise<void> {
  await client.query(`CREATE TABLE IF NOT EXISTS ${tableIn(schema, CUSTOMER_SUMMARY_TABLE)} (
    customer_id  text PRIMARY KEY,
    invoices     integer NOT NULL DEFAULT 0,
    total_issued numeric(14,2) NOT NULL DEFAULT 0,
    total_paid   numeric(14,2) NOT NULL DEFAULT 0,
    outstanding  numeric(14,2) NOT NULL DEFAULT 0)`);
  await client.query(`CREATE TABLE IF NOT EXISTS ${tableIn(schema, CUSTOMER_SUMMARY_INVOICES_TABLE)} (
    invoice_id  text PRIMARY KEY,
    customer_id text NOT NULL,
    issued      numeric(14,2) NOT NULL DEFAULT 0,
    paid        numeric(14,2) NOT NULL DEFAULT 0,
    outstanding numeric(14,2) NOT NULL DEFAULT 0)`);
}

/** Increments of one customer's row (decimal strings: the arithmetic stays in PostgreSQL). */
interface Deltas {
  readonly invoices: number;
  readonly issued: string;
  readonly paid: string;
  readonly outstanding: string;
}

async function addToCustomer({ client, schema }: ProjectionContext, customerId: string, d: Deltas): Promise<void> {
  await client.query(
    `INSERT INTO ${tableIn(schema, CUSTOMER_SUMMARY_TABLE)} AS s (customer_id, invoices, total_issued, total_paid, outstanding) VALUES ($1, $2, $3::numeric, $4::numeric, $5::numeric)
     ON CONFLICT (customer_id) DO UPDATE SET invoices = s.invoices + EXCLUDED.invoices, total_issued = s.total_issued + EXCLUDED.total_issued,
       total_paid = s.total_paid + EXCLUDED.total_paid, outstanding = s.outstanding + EXCLUDED.outstanding`,
    [customerId, d.invoices, d.issued, d.paid, d.outstanding],
  );
}

/** Counts the invoice for its customer the first time the summary hears of it. */
async function track(ctx: ProjectionContext, invoiceId: string, customerId: string): Promise<void> {
  const inserted = await ctx.client.query(`INSERT INTO ${tableIn(ctx.schema, CUSTOMER_SUMMARY_INVOICES_TABLE)} (invoice_id, customer_id) VALUES ($1, $2) ON CONFLICT (invoice_id) DO NOTHING`, [
    invoiceId,
    customerId,
  ]);
  if (inserted.rowCount === 1) await addToCustomer(ctx, customerId, { invoices: 1, issued: '0', paid: '0', outstanding: '0' });
}

/**
 * Changes the invoice's contribution (`set`: assignments that may read its old values as `o.*`,
 * parameters from `$2`) and adds the difference to its customer's row. The self-join reads the
 * row as it was before this statement, so the difference is computed in one statement, in numeric.
 */
async function change(ctx: ProjectionContext, type: string, invoiceId: string, set: string, params: readonly unknown[]): Promise<void> {
  const invoices = tableIn(ctx.schema, CUSTOMER_SUMMARY_INVOICES_TABLE);
  const result = await ctx.client.query<{ customer_id: string; issued: string; paid: string; outstanding: string }>(
    `UPDATE ${invoices} AS l SET ${set} FROM ${invoices} AS o WHERE l.invoice_id = o.invoice_id AND l.invoice_id = $1
     RETURNING l.customer_id, (l.issued - o.issued)::text AS issued, (l.paid - o.paid)::text AS paid, (l.outstanding - o.outstanding)::text AS outstanding`,
    [invoiceId, ...params],
  );
  const row = result.rows[0];
  // An invoice the summary never saw created: halt (the kit's default) rather than lose the effect.
  if (!row) throw new Error(`${type} for invoice ${invoiceId}, which the customerSummary projection does not hold`);
  await addToCustomer(ctx, row.customer_id, { invoices: 0, issued: row.issued, paid: row.paid, outstanding: row.outstanding });
}

/**
 * Forgets a discarded invoice: takes what it contributed (nothing, for a draft, but the
 * statement does not rely on it) and its count off its customer's row, and drops a row left
 * with no invoice, so the summary keeps only customers with at least one.
 */
async function untrack(ctx: ProjectionContext, type: string, invoiceId: string): Promise<void> {
  const result = await ctx.client.query<{ customer_id: string; issued: string; paid: string; outstanding: string }>(
    `DELETE FROM ${tableIn(ctx.schema, CUSTOMER_SUMMARY_INVOICES_TABLE)} WHERE invoice_id = $1
     RETURNING customer_id, (-issued)::text AS issued, (-paid)::text AS paid, (-outstanding)::text AS outstanding`,
    [invoiceId],
  );
  const row = result.rows[0];
  if (!row) throw new Error(`${type} for invoice ${invoiceId}, which the customerSummary projection does not hold`);
  await addToCustomer(ctx, row.customer_id, { invoices: -1, issued: row.issued, paid: row.paid, outstanding: row.outstanding });
  await ctx.client.query(`DELETE FROM ${tableIn(ctx.schema, CUSTOMER_SUMMARY_TABLE)} WHERE customer_id = $1 AND invoices = 0`, [row.customer_id]);
}

/**
 * Per customer with at least one invoice (a customer appears with its first invoice):
 * `invoices` (every status), `total_issued` (totals of invoices issued or paid — a voided invoice
 * no longer counts), `total_paid` (payments received), `outstanding` (issued − paid, voided
 * invoices owing nothing). Same rules as `invoices`: an imported `paid` invoice counts as paid in
 * full; voiding cancels what the invoice still owed; a discarded draft is no invoice any more.
 */
export function createCustomerSummaryProjection(options: InvoicingProjectionOptions = {}): Projection<LatestEventContracts> {
  const mine = (invoiceId: string) => inScope(options, invoiceId);
  return defineProjection<LatestEventContracts>({
    name: 'customer-summary',
    from: { categories: ['invoice'] },
    ...(options.batchSize ? { batchSize: options.batchSize } : {}),
    deletes: ['InvoiceDiscarded'],
    setup,
    handlers: {
      InvoiceDrafted: async ({ data }, ctx) => {
        if (mine(data.invoiceId)) await track(ctx, data.invoiceId, data.customerId);
      },
      InvoiceImported: async ({ type, data }, ctx) => {
        if (!mine(data.invoiceId)) return;
        await track(ctx, data.invoiceId, data.customerId);
        // A snapshot record is the invoice's state, not a change: it replaces the contribution.
        const set = `issued = CASE WHEN $2 IN ('issued', 'paid') THEN $3::numeric ELSE 0 END, paid = CASE WHEN $2 = 'paid' THEN $3::numeric ELSE 0 END,
          outstanding = CASE WHEN $2 = 'issued' THEN $3::numeric ELSE 0 END`;
        await change(ctx, type, data.invoiceId, set, [data.status, data.total]);
      },
      InvoiceIssued: async ({ type, data }, ctx) => {
        if (!mine(data.invoiceId)) return;
        await track(ctx, data.invoiceId, data.customerId);
        await change(ctx, type, data.invoiceId, 'issued = $2::numeric, outstanding = o.outstanding + $2::numeric', [data.total.amount]);
      },
      InvoicePaid: async ({ type, data }, ctx) => {
        if (mine(data.invoiceId)) await change(ctx, type, data.invoiceId, 'paid = o.paid + $2::numeric, outstanding = o.outstanding - $2::numeric', [data.amount]);
      },
      InvoiceVoided: async ({ type, data }, ctx) => {
        if (mine(data.invoiceId)) await change(ctx, type, data.invoiceId, 'issued = 0, outstanding = 0', []);
      },
      InvoiceDiscarded: async ({ type, data }, ctx) => {
        if (mine(data.invoiceId)) await untrack(ctx, type, data.invoiceId);
      },
    },
  });
}
