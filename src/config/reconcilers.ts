/**
 * The configuration's reconcilers (`event-assembler reconcile`, docs/reconcile.md): each made by
 * `defineReconciler`, uniquely named, for a table a mapper reads, and reading only columns some
 * mapper allowlists for it — so a reconciliation report can never show a column no event may carry.
 */
import { mapperRequirements, type AnyMapper } from '../mapping/index.js';
import { isReconciler, type AnyReconciler } from '../reconcile/define-reconciler.js';
import { add, type Findings } from './checks.js';

const FIX = 'make each with defineReconciler({ table, columns, streamPrefix, stream, expected, fold }) (docs/reconcile.md)';

/** The valid reconcilers (`[]` when none are given); problems are added to `findings`. */
export function checkReconcilers(value: unknown, mappers: readonly AnyMapper[] | null, findings: Findings): AnyReconciler[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    add(findings, 'reconcilers', `expected a list, got ${value === null ? 'null' : typeof value}`, FIX);
    return [];
  }
  const requirements = mappers ? mapperRequirements(mappers) : null;
  const names = new Set<string>();
  const valid: AnyReconciler[] = [];
  value.forEach((r: unknown, i) => {
    const field = `reconcilers.${i}`;
    if (!isReconciler(r)) return add(findings, field, 'is not a reconciler', FIX);
    if (names.has(r.name)) return add(findings, field, `two reconcilers are named "${r.name}"`, 'give each reconciler a unique name (name: …)');
    names.add(r.name);
    if (requirements === null) return;
    const requirement = requirements[r.table];
    if (!requirement) return add(findings, `${field}.table`, `no mapper reads ${r.table}`, 'reconcile a table your mappers declare (their tables: { … })');
    const hidden = r.columns.filter((c: string) => !requirement.columns.includes(c));
    if (hidden.length > 0) {
      return add(findings, `${field}.columns`, `${hidden.join(', ')} ${hidden.length === 1 ? 'is' : 'are'} not allowlisted by any mapper for ${r.table}`,
        `read only columns a mapper declares for ${r.table} (${requirement.columns.join(', ')}): a reconciler sees what events may carry, never a hidden column`);
    }
    valid.push(r);
  });
  return valid;
}
