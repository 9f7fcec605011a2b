// The report for people (the CLI's default output) and the progress line on a terminal.
import { formatCount } from '../source/snapshot/index.js';
import type { EntityRef, ReconcileProgress, ReconcileReport } from './types.js';

function keyText(ref: EntityRef): string {
  return ref.key ? ` ${Object.entries(ref.key).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ')}` : '';
}

function value(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function table(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ').trimEnd());
}

/** The whole report as text: the cut, a line per reconciler, then the first entities of each kind of difference. */
export function formatReconcileReport(report: ReconcileReport): string {
  const lines: string[] = [];
  const scope = report.sample === null ? `${report.ranges.total} key range(s), ${report.ranges.differing} with differing hashes` : `a sample of ${report.sample} rows per table (extras are not looked for)`;
  lines.push(`cut ${report.cut.lsn} (checkpoint ${report.cut.checkpointLsn}, waited ${(report.cut.waitedMs / 1000).toFixed(1)} s); ${scope}; ${report.events.folded} of ${report.events.read} events folded; ${(report.durationMs / 1000).toFixed(1)} s`);
  lines.push('');
  const header = ['reconciler', 'table', 'rows', 'entities', 'agreeing', 'missing', 'extra', 'different', 'deleted-but-alive'];
  const rows = report.summaries.map((s) => [s.reconciler, s.table, String(s.rows), String(s.entities), String(s.agreeing), String(s.missing), String(s.extra), String(s.different), String(s.deletedButAlive)]);
  lines.push(...table([header, ...rows]));
  const total = (kind: 'missing' | 'extra' | 'different' | 'deletedButAlive') => report.summaries.reduce((n, s) => n + s[kind], 0);
  const section = (title: string, kind: 'missing' | 'extra' | 'different' | 'deletedButAlive', meaning: string, list: readonly (EntityRef & { fields?: readonly { field: string; expected: unknown; actual: unknown }[] })[]) => {
    if (list.length === 0) return;
    lines.push('', `${title} (${meaning}): ${total(kind)}${total(kind) > list.length ? `, first ${list.length} shown` : ''}`);
    for (const ref of list) {
      const fields = ref.fields ? `: ${ref.fields.map((f) => `${f.field} expected ${value(f.expected)}, found ${value(f.actual)}`).join('; ')}` : '';
      lines.push(`  ${ref.stream} (${ref.reconciler}${keyText(ref)})${fields}`);
    }
  };
  section('missing', 'missing', 'source row, no events in the cut', report.missing);
  section('different', 'different', 'both sides, some field differs', report.different);
  section('extra', 'extra', 'events say alive, no source row', report.extra);
  section('deleted but alive', 'deletedButAlive', 'events say deleted, source row present', report.deletedButAlive);
  lines.push('', report.ok ? 'agreement: the destination says what the source says at the cut' : 'differences found (exit 1): docs/runbook.md "Reconciliation found differences" has the recovery for each kind');
  return `${lines.join('\n')}\n`;
}

/** One progress line (redrawn in place on a terminal). */
export function formatReconcileProgress(p: ReconcileProgress): string {
  if (p.phase === 'cut') return 'reconcile: taking the cut and waiting for the assembler to pass it…';
  const of = p.total === null ? '' : `/${formatCount(p.total)}`;
  if (p.phase === 'destination') return `reconcile: destination ${formatCount(p.done)} events read`;
  if (p.phase === 'source') return `reconcile: source ${p.table ?? ''} ${formatCount(p.done)}${of} rows`;
  return `reconcile: compared ${p.done}${of} key ranges`;
}
