// The demo's reconciliation: while the assembler still runs, `reconcile` compares the example's
// invoice rows with their streams at a consistent cut (docs/reconcile.md) — the check an
// operator runs in production, where no reference slot exists. Invoices only: the example
// registers customers from inserts alone (no snapshot mapper for them), so the customers seeded
// before capture have no stream, and reconciling customers would rightly list them as missing.
import { defineReconciler, reconcile, type AnyReconciler, type ReconcileReport } from '../../../reconcile/index.js';
import type { DemoNames } from './names.js';

export interface DemoReconciliation {
  readonly report: ReconcileReport | null;
  readonly error: string | null;
}

/** On a shared server the run's streams carry its id prefix: the reconcilers read only those. */
function ownStreams(reconcilers: readonly AnyReconciler[], idPrefix: string | undefined): AnyReconciler[] {
  if (!idPrefix) return [...reconcilers];
  return reconcilers.map((r) => defineReconciler({ ...r, streamPrefix: `${r.streamPrefix}${idPrefix}_` }));
}

export async function reconcileDemo(input: {
  readonly names: DemoNames;
  readonly capture: string;
  readonly kurrentdb: string;
  readonly reconcilers: readonly AnyReconciler[];
}): Promise<DemoReconciliation> {
  try {
    const report = await reconcile({
      assembler: input.names.assembler,
      source: { connection: input.capture, publications: [input.names.publication] },
      destination: { connectionString: input.kurrentdb },
      reconcilers: ownStreams(input.reconcilers.filter((r) => r.table.endsWith('.invoice')), input.names.idPrefix),
      show: 3,
    });
    return { report, error: null };
  } catch (error) {
    return { report: null, error: error instanceof Error ? error.message : String(error) };
  }
}

/** `reconcile     at cut 0/…: public.invoice 903 rows, public.customer 299 rows agree (0.2 s)`. */
export function formatReconciliation(r: DemoReconciliation): string {
  if (!r.report) return `  reconcile     FAILED: ${r.error ?? 'no report'}`;
  const { report } = r;
  const tables = report.summaries.map((s) => `${s.table} ${s.rows} rows`).join(', ');
  if (report.ok) return `  reconcile     at cut ${report.cut.lsn}: ${tables} agree with their streams (${(report.durationMs / 1000).toFixed(1)} s)`;
  const kinds = report.summaries.map((s) => `${s.table}: missing ${s.missing}, extra ${s.extra}, different ${s.different}, deleted but alive ${s.deletedButAlive}`).join('; ');
  const first = [...report.missing, ...report.different, ...report.extra, ...report.deletedButAlive].slice(0, 3).map((e) => e.stream).join(', ');
  return `  reconcile     at cut ${report.cut.lsn}: DIFFERENCES (${kinds}; e.g. ${first})`;
}
