// The projections' check: their balances recomputed with SQL from the demo's source tables. Per
// invoice, outstanding = its total when issued or paid, minus the sum of its payments; a draft or
// a voided invoice owes nothing (voiding cancels the invoice: see examples/invoicing/projections).
// Per customer with invoices: their count, the totals of invoices issued or paid, the payments,
// and the sum of the outstanding balances. Compared exactly, in numeric, both ways (missing, extra, different).
import pg from 'pg';
import { withClient } from './connections.js';
import type { ProjectionComparison } from './types.js';

/** What the source says each invoice (and customer) must show. */
function expectedSql(source: string): string {
  const s = pg.escapeIdentifier(source);
  return `paid AS (SELECT invoice_id, sum(amount) AS paid FROM ${s}.payment GROUP BY invoice_id),
    inv AS (
      SELECT i.id AS invoice_id, i.customer_id, i.status, i.total, coalesce(p.paid, 0) AS paid,
             CASE WHEN i.status IN ('issued', 'paid') THEN i.total - coalesce(p.paid, 0) ELSE 0 END AS outstanding
        FROM ${s}.invoice i LEFT JOIN paid p ON p.invoice_id = i.id),
    cus AS (
      SELECT customer_id, count(*)::bigint AS invoices, sum(CASE WHEN status IN ('issued', 'paid') THEN total ELSE 0 END) AS total_issued,
             sum(paid) AS total_paid, sum(outstanding) AS outstanding
        FROM inv GROUP BY customer_id)`;
}

/** Counts of one FULL JOIN of expected (`e`) and projected (`v`) rows on `key`, with up to 3 keys that disagree. */
function compareSql(expected: string, projected: string, key: string, columns: readonly string[]): string {
  const differs = `(${columns.map((c) => `e.${c}`).join(', ')}) IS DISTINCT FROM (${columns.map((c) => `v.${c}`).join(', ')})`;
  return `SELECT (SELECT count(*) FROM ${projected})::int AS rows,
      count(e.${key})::int AS checked,
      count(*) FILTER (WHERE v.${key} IS NULL)::int AS missing,
      count(*) FILTER (WHERE e.${key} IS NULL)::int AS extra,
      count(*) FILTER (WHERE e.${key} IS NOT NULL AND v.${key} IS NOT NULL AND ${differs})::int AS different,
      (array_agg(coalesce(e.${key}, v.${key}) ORDER BY coalesce(e.${key}, v.${key})) FILTER (WHERE e.${key} IS NULL OR v.${key} IS NULL OR ${differs}))[1:3] AS samples
    FROM ${expected} e FULL JOIN ${projected} v ON v.${key} = e.${key}`;
}

export async function checkProjections(admin: string, source: string, projections: string): Promise<{ invoices: ProjectionComparison; customers: ProjectionComparison; ok: boolean }> {
  const p = pg.escapeIdentifier(projections);
  return withClient(admin, async (c) => {
    const run = async (sql: string): Promise<ProjectionComparison> => {
      const row = (await c.query<ProjectionComparison & { samples: string[] | null }>(`WITH ${expectedSql(source)} ${sql}`)).rows[0]!;
      return { ...row, samples: row.samples ?? [] };
    };
    const invoices = await run(compareSql('inv', `${p}.invoices`, 'invoice_id', ['customer_id', 'status', 'paid', 'outstanding']));
    const customers = await run(compareSql('cus', `${p}.customer_summary`, 'customer_id', ['invoices::bigint', 'total_issued', 'total_paid', 'outstanding']));
    const clean = (r: ProjectionComparison) => r.missing + r.extra + r.different === 0;
    return { invoices, customers, ok: clean(invoices) && clean(customers) };
  });
}
