// The report: per-reconciler counts, and the first entities of each kind of difference.
import type { AnyReconciler } from './define-reconciler.js';
import type { Compared, Differences, EntityRef, ReconcileReport, ReconcilerSummary } from './types.js';

/** The report's lists: sorted by stream, the first `show` of each; the counts stay whole in the summaries. */
export function shown(differences: Differences, show: number): Differences {
  const first = <T extends EntityRef>(list: T[]) => [...list].sort((a, b) => (a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : 0)).slice(0, show);
  return { missing: first(differences.missing), extra: first(differences.extra), different: first(differences.different), deletedButAlive: first(differences.deletedButAlive) };
}

/** Per reconciler: the counts of each kind of difference. */
export function summarize(reconcilers: readonly AnyReconciler[], rows: readonly number[], entities: readonly number[], agreeing: readonly number[], differences: Differences): ReconcilerSummary[] {
  const count = (list: readonly EntityRef[], name: string) => list.filter((e) => e.reconciler === name).length;
  return reconcilers.map((r, i) => ({
    reconciler: r.name,
    table: r.table,
    rows: rows[i]!,
    entities: entities[i]!,
    agreeing: agreeing[i]!,
    missing: count(differences.missing, r.name),
    extra: count(differences.extra, r.name),
    different: count(differences.different, r.name),
    deletedButAlive: count(differences.deletedButAlive, r.name),
  }));
}

export function finish(
  started: number, cut: ReconcileReport['cut'], sample: number | null, reconcilers: readonly AnyReconciler[], compared: Compared, show: number, ranges: { total: number; differing: number },
): ReconcileReport {
  const summaries = summarize(reconcilers, compared.rows, compared.entities, compared.agreeing, compared);
  const ok = compared.missing.length + compared.extra.length + compared.different.length + compared.deletedButAlive.length === 0;
  return { version: 1, ok, cut, sample, summaries, ranges, ...shown(compared, show), events: compared.events, durationMs: Date.now() - started };
}
