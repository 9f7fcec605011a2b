// The markdown report of bench/reconcile.bench.ts: every run per round, the ratio of reconcile to
// the round's plain COPY + plain read, peak RSS, the phases; written to bench/results/<date>-reconcile.md.
import os from 'node:os';
import { CLI_NODE_FLAGS } from '../../test/resilience/assembler-process.js';
import type { Phases } from './reconcile-phases.js';
import type { ReconcileLine } from './reconcile-line.js';
import type { ReconcileRun } from './reconcile-runs.js';
import { gitCommit, writeResult } from './results.js';

export interface Measured {
  readonly kind: 'copy' | 'read' | 'reconcile' | 'reconcile-small' | 'sample';
  readonly round: number;
  readonly loadAtStart: string;
  readonly seconds: number;
  /** Rows copied, events read, rows reconciled. */
  readonly count: number;
  readonly reconcile: ReconcileRun | null;
}

export interface ReportInput {
  readonly invoices: number;
  readonly customers: number;
  readonly rounds: number;
  readonly smallRange: number;
  readonly sample: number;
  readonly maxLoad: number;
  readonly loadBeforeStart: string;
  readonly loadAtEnd: string;
  readonly quietChecks: readonly { what: string; quiet: boolean; waitedSeconds: number; load: string }[];
  readonly line: ReconcileLine;
  readonly runs: readonly Measured[];
  readonly phases: Phases | null;
}

const TARGET = 2;
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

function label(input: ReportInput, kind: Measured['kind']): string {
  switch (kind) {
    case 'copy': return 'plain COPY (rows counted)';
    case 'read': return 'plain read (events counted)';
    case 'reconcile': return 'reconcile (default --range-size 50,000)';
    case 'reconcile-small': return `reconcile --range-size ${fmt(input.smallRange)}`;
    case 'sample': return `reconcile --sample ${fmt(input.sample)}`;
  }
}

/** The round's plain COPY + plain read, seconds. */
function baseline(runs: readonly Measured[], round: number): number {
  const of = (kind: Measured['kind']) => runs.find((r) => r.round === round && r.kind === kind)!.seconds;
  return of('copy') + of('read');
}

function runsTable(input: ReportInput): string {
  const order = new Map<number, number>();
  const rows = input.runs.map((r) => {
    order.set(r.round, (order.get(r.round) ?? 0) + 1);
    const base = baseline(input.runs, r.round);
    const rec = r.reconcile;
    const ratio = rec ? `${(r.seconds / base).toFixed(2)} (${(rec.reportSeconds / base).toFixed(2)})` : '';
    const detail = rec ? `${rec.reportSeconds.toFixed(2)} | ${rec.waitedSeconds.toFixed(2)} | ${fmt(rec.report.ranges.total)} | ${fmt(rec.peakRssMiB)}` : '| | | ';
    return `| ${r.round} | ${order.get(r.round)} | ${label(input, r.kind)} | ${r.loadAtStart} | ${fmt(r.count)} | ${r.seconds.toFixed(2)} | ${ratio} | ${detail} |`;
  });
  return [
    '| round | order | run | load at start (1/5/15 min) | rows / events | seconds (wall) | × (COPY + read) of the round: wall (report) | report durationMs, s | of which checkpoint wait, s | key ranges | peak RSS, MiB |',
    '|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}

function summaryTable(input: ReportInput): string {
  const rounds = [...new Set(input.runs.map((r) => r.round))];
  const kinds: Measured['kind'][] = ['copy', 'read', 'reconcile', 'reconcile-small', ...(input.sample > 0 ? (['sample'] as const) : [])];
  const rows = kinds.map((kind) => {
    const runs = input.runs.filter((r) => r.kind === kind);
    const seconds = runs.map((r) => r.seconds);
    const ratios = runs.map((r) => r.seconds / baseline(input.runs, r.round));
    const rss = runs.map((r) => r.reconcile?.peakRssMiB).filter((n): n is number => n !== undefined);
    const isReconcile = kind !== 'copy' && kind !== 'read';
    const met = isReconcile && kind !== 'sample' ? (ratios.every((x) => x <= TARGET) ? 'met in every round' : ratios.some((x) => x <= TARGET) ? 'met in some rounds' : 'missed') : '';
    return `| ${label(input, kind)} | ${fmt(mean(seconds), 2)} | ${seconds.map((s) => s.toFixed(2)).join(', ')} | ${isReconcile ? ratios.map((x) => x.toFixed(2)).join(', ') : ''} | ${rss.length ? `${fmt(Math.max(...rss))}` : ''} | ${met} |`;
  });
  const base = rounds.map((round) => baseline(input.runs, round));
  return [
    `| run | mean s | per round, s | × (COPY + read) per round | peak RSS, MiB (max) | target ≤ ${TARGET}× |`,
    '|---|---:|---:|---:|---:|---|',
    `| plain COPY + plain read (the sum) | ${fmt(mean(base), 2)} | ${base.map((s) => s.toFixed(2)).join(', ')} | 1.00 | | |`,
    ...rows,
  ].join('\n');
}

export function writeReport(input: ReportInput, log: (line: string) => void): void {
  const cpus = os.cpus();
  const now = new Date();
  const env = [
    input.invoices !== 1_000_000 ? `EA_BENCH_RECONCILE_INVOICES=${input.invoices}` : '',
    input.rounds !== 3 ? `EA_BENCH_RECONCILE_ROUNDS=${input.rounds}` : '',
    process.env.EA_BENCH_RECONCILE_SNAPSHOT ? `EA_BENCH_RECONCILE_SNAPSHOT='${process.env.EA_BENCH_RECONCILE_SNAPSHOT}'` : '',
  ].filter(Boolean);
  const line = input.line;
  const quiet = input.quietChecks.map((q) => `${q.what} ${q.load}${q.quiet ? '' : ' (not quiet: measured anyway)'}${q.waitedSeconds > 0 ? ` after ${q.waitedSeconds} s` : ''}`).join('; ');
  const phases = input.phases ? input.phases.lines.map((l) => `- ${l}`).join('\n') : '(not measured)';
  const report = `# Reconcile against a plain COPY and a plain read

Command (from the repository root):

\`\`\`bash
${[...env, 'npm run bench:reconcile'].join(' ')}
\`\`\`

Machine: ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown'}, ${fmt(os.totalmem() / 2 ** 30, 1)} GiB; Node ${process.version}; reconcile run as the CLI of the production build with \`${CLI_NODE_FLAGS.join(' ')}\` (bin/event-assembler.js's flags).
Load average (1 / 5 / 15 min) before the bench started ${input.loadBeforeStart}; when each round (and the phases' run) started, after waiting for the 1-minute load to drop below ${input.maxLoad}: ${quiet}; at the end ${input.loadAtEnd}. Each run's load at its start is in the table.
Run at ${now.toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${gitCommit()}.

The line: ${fmt(input.invoices)} invoices over ${fmt(input.customers)} customers (statuses draft / issued / paid / void 1 : 2 : 6 : 1), filled with generate_series and VACUUM ANALYZE in ${line.fillSeconds.toFixed(1)} s; the invoicing assembler (production build, in the bench process) took its initial snapshot (chunkSize ${fmt(line.snapshotSettings.chunkSize)}, parallelism ${line.snapshotSettings.parallelism}) into the in-memory KurrentDB (a process of its own) in ${line.snapshotSeconds.toFixed(1)} s — ${fmt(line.snapshot.rows)} rows read, ${fmt(line.snapshot.events)} events — and kept running during every run (idle: reconcile waits for its checkpoint to pass each cut).

What is timed, each from a fresh connection:
- **plain COPY**: \`COPY (SELECT id, customer_id, status, currency, total FROM invoice ORDER BY id) TO STDOUT\` through node-postgres in the bench process, counting rows (no parsing) — the columns reconcile reads, in its order;
- **plain read**: the KurrentDB client's \`readAll\` forwards from START with \`streamNameFilter({ prefixes: ['invoice-', '$$invoice-'] })\`, counting events — the read reconcile does;
- **reconcile**: \`event-assembler reconcile --config … --tables public.invoice --json\` as a child process, wall time from spawn to exit (Node start and loading the TypeScript configuration included); in brackets the report's own \`durationMs\`. Every report said \`ok: true\` with all ${fmt(input.invoices)} rows agreeing (sampled runs: every sampled row).

Peak RSS is the reconcile process's alone (its maximum resident set size, \`/usr/bin/time -f %M\`): the assembler (bench process), the in-memory KurrentDB and PostgreSQL are not included.

## Per round

${summaryTable(input)}

## Every run, in the order run

${runsTable(input)}

## Where reconcile's time goes (one more run, in the bench process, from the build; phases by its progress callback)

${phases}
`;
  console.log(report);
  log(`written ${writeResult('reconcile', report, now)}`);
}
