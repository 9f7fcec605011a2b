// The summary printed at the end of a run: workload, assembler, snapshot, events by type
// against the source history, parked records, lag, sensitive values, the destination check and
// the projections' balances.
import { formatDestinationReport } from '../../../testing/verify-destination.js';
import { formatReconciliation } from './reconcile-check.js';
import type { DemoResult, LatencySummary, ProjectionComparison, ProjectionsReport } from './types.js';

export function formatSummary(result: DemoResult): string {
  const { summary, workload, report, latency } = result;
  const lines: string[] = ['', 'summary'];
  const ops = Object.entries(workload.operations).map(([k, v]) => `${k} ${v}`).join(', ');
  const seedTransactions = workload.transactions - Object.values(workload.operations).reduce((a, b) => a + b, 0);
  lines.push(`  workload      ${workload.transactions} transactions committed: ${plural(seedTransactions, 'seed transaction')} (${workload.seeded.customers} customers, ${workload.seeded.invoices} invoices) before the assembler started, then ${ops}`);
  lines.push(`                live: ${result.live.transactions} transactions in ${result.live.seconds.toFixed(1)} s (${Math.round(result.live.transactions / Math.max(result.live.seconds, 0.001))} tx/s)`);
  lines.push(
    `  assembler     ${summary.transactions.received} transactions received, ${summary.transactions.appended} appended, ${summary.transactions.skipped} without events, ` +
      `${summary.events.appended} events appended (${summary.mode ?? 'custom'} mode)`,
  );
  if (summary.snapshot) {
    const s = summary.snapshot;
    lines.push(
      `  snapshot      generation ${s.generation ?? '–'} (${s.action}): ${s.rows} rows read at the slot's exported snapshot → ${s.events} events; ` +
        `${s.finished ? 'complete' : 'NOT complete'}, streaming from consistent point ${s.consistentPoint ?? '–'}`,
    );
  }
  const types = Object.keys({ ...summary.events.byType, ...report.byType }).sort();
  for (const type of types) {
    const appended = summary.events.byType[type] ?? 0;
    const expected = report.byType[type]?.expected ?? 0;
    lines.push(`    ${type.padEnd(20)} ${String(appended).padStart(7)}   (source history: ${expected})`);
  }
  lines.push(`  parked        ${summary.parked.mapperFailures} mapper failures, ${summary.parked.contractViolations} contract violations`);
  lines.push(
    latency
      ? `  lag           commit → durable in KurrentDB over ${latency.transactions} transactions: p50 ${latency.p50Ms} ms, p99 ${latency.p99Ms} ms, max ${latency.maxMs} ms`
      : '  lag           (no transactions with events)',
  );
  lines.push(`  sensitive     ${result.sensitive.found === 0 ? 'none' : `${result.sensitive.found} FOUND`} of ${result.sensitive.checkedValues} customer email/card_number values in the destination`);
  lines.push(...formatDestinationReport(report).split('\n').map((l) => `  ${l}`));
  lines.push(formatProjections(result.projections));
  lines.push(formatReconciliation(result.reconciliation));
  lines.push('', result.ok ? 'demo: OK' : 'demo: FAILED');
  return `${lines.join('\n')}\n`;
}

/** `projections   invoices 1102 rows, customerSummary 200 rows caught up in 0.4 s; balances: OK (…)`. */
export function formatProjections(p: ProjectionsReport): string {
  if (!p.invoices || !p.customers) return `  projections   FAILED after ${p.seconds.toFixed(1)} s: ${p.error ?? 'no report'}`;
  const head = `  projections   invoices ${p.invoices.rows} rows, customerSummary ${p.customers.rows} rows caught up in ${p.seconds.toFixed(1)} s; balances: `;
  if (p.ok) return `${head}OK (${plural(p.invoices.checked, 'invoice')}, ${plural(p.customers.checked, 'customer')} checked)`;
  const part = (name: string, c: ProjectionComparison) => `${name} missing ${c.missing}, extra ${c.extra}, different ${c.different}${c.samples.length > 0 ? ` (${c.samples.join(', ')})` : ''}`;
  return `${head}FAILED (${part('invoices', p.invoices)}; ${part('customers', p.customers)})`;
}

/**
 * Commit → durable lag as the pipeline measured it when each append resolved. (Reading it back
 * from the destination does not work: the client returns an event's `created` in whole seconds.)
 */
export function latencyOf(p: { samples: number; p50Ms: number; p99Ms: number; maxMs: number } | null): LatencySummary | null {
  return p ? { transactions: p.samples, p50Ms: p.p50Ms, p99Ms: p.p99Ms, maxMs: p.maxMs } : null;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
