// The markdown of `npm run bench` (bench/run.ts): consumers (median over interleaved rounds, the
// spread of their ratios to raw, CPU per transaction by process), commit → seen latency at steady
// rates, and the snapshots end to end.
import type { ConsumerRun, ConsumerSummary } from './e2e-runs.js';
import type { SnapshotRun } from './snapshot-runs.js';

export interface LatencyRow {
  readonly rate: number;
  readonly transactions: number;
  readonly events: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly late: number;
  readonly writeSeconds: number;
  readonly drainSeconds: number;
  readonly assemblerP50: number;
  readonly assemblerP99: number;
  /** CPU time of the bench process (the assembler; idle otherwise) per paced transaction, µs; NaN where /proc does not say. */
  readonly assemblerCpuUs: number;
  /** Append calls per paced transaction's worth: units per call while it ran. */
  readonly unitsPerCall: number;
}

export interface E2eReportInput {
  readonly transactions: number;
  readonly rounds: number;
  readonly pgoutputBytes: number | null;
  readonly runs: readonly ConsumerRun[];
  readonly summaries: readonly ConsumerSummary[];
  readonly latencies: readonly LatencyRow[];
  readonly assemblerLagWindow: number;
  readonly snapshots: readonly SnapshotRun[];
  readonly snapshotAppendMs: number;
  readonly notes: readonly string[];
}

const fmt = (n: number, digits = 0) => (Number.isNaN(n) ? '—' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }));

function consumerTable(input: E2eReportInput): string {
  const { transactions: n } = input;
  return [
    '| consumer | median seconds | transactions/s | ratio to raw (median) | spread (min–max) | target | CPU µs/tx: bench process ¹ | of it once running ⁴ | walsender | in-memory KurrentDB | start-up (s) |',
    '|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|',
    ...input.summaries.map((s) => {
      const spread = s.ratios.length ? `${Math.min(...s.ratios).toFixed(2)}–${Math.max(...s.ratios).toFixed(2)}` : '—';
      return `| ${s.label} | ${s.medianSeconds.toFixed(2)} | ${fmt(n / s.medianSeconds)} | ${s.kind === 'raw' ? '1.00' : s.medianRatio.toFixed(2)} | ${s.kind === 'raw' ? '' : spread} | ${s.target} | ${fmt(s.cpuUs.bench)} | ${fmt(s.benchRunningCpuUs)} | ${fmt(s.cpuUs.walsender)} | ${fmt(s.cpuUs.server)} | ${Number.isNaN(s.startupSeconds) ? '' : s.startupSeconds.toFixed(2)} |`;
    }),
  ].join('\n');
}

function runsTable(input: E2eReportInput): string {
  const us = (seconds: number | null) => (seconds === null ? '—' : fmt((seconds * 1e6) / input.transactions));
  return [
    '| round | consumer | seconds | ratio to the round\'s raw | CPU µs/tx: bench process | once running | walsender | server |',
    '|---:|---|---:|---:|---:|---:|---:|---:|',
    ...input.runs.map((r) => {
      const raw = input.runs.find((x) => x.kind === 'raw' && x.round === r.round)?.seconds;
      return `| ${r.round} | ${r.kind} | ${r.seconds.toFixed(2)} | ${raw ? (raw / r.seconds).toFixed(2) : '—'} | ${us(r.cpu.bench)} | ${r.startupCpuSeconds === undefined ? '' : us(r.cpu.bench - r.startupCpuSeconds)} | ${us(r.cpu.walsender)} | ${us(r.cpu.server)} |`;
    }),
  ].join('\n');
}

function latencyTable(input: E2eReportInput): string {
  if (input.latencies.length === 0) return '(latency runs skipped: EA_BENCH_LATENCY_SECONDS=0)';
  return [
    `| rate (transactions/s) | transactions | events read back | commit → durable p50 (destination) | p99 | max | commit → durable p50 (assembler) | p99 | writer behind schedule (>100 ms) | seconds after the last write until all were read back | assembler CPU µs/tx ³ | transactions per append call |`,
    `|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`,
    ...input.latencies.map(
      (l) =>
        `| ${fmt(l.rate)} for ${l.writeSeconds.toFixed(1)} s | ${fmt(l.transactions)} | ${fmt(l.events)} | ${fmt(l.p50)} ms | ${fmt(l.p99)} ms | ${fmt(l.max)} ms | ${Number.isNaN(l.assemblerP50) ? 'n/a ²' : `${fmt(l.assemblerP50)} ms`} | ${Number.isNaN(l.assemblerP99) ? 'n/a ²' : `${fmt(l.assemblerP99)} ms`} | ${l.late} | ${l.drainSeconds.toFixed(1)} | ${fmt(l.assemblerCpuUs)} | ${fmt(l.unitsPerCall, 1)} |`,
    ),
  ].join('\n');
}

function snapshotTable(input: E2eReportInput): string {
  if (input.snapshots.length === 0) return '(snapshot runs skipped: EA_BENCH_SNAPSHOT_ROWS=0)';
  const us = (seconds: number | null, rows: number) => (seconds === null ? '—' : fmt((seconds * 1e6) / rows));
  return [
    '| snapshot | rows | events | seconds | rows/s | CPU µs/row: bench process ¹ | walsender | in-memory KurrentDB | paced writer: rate, commit → durable p50 / p99 / max |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
    ...input.snapshots.map(
      (s) =>
        `| ${s.kind === 'initial' ? 'initial (mode initial, at the slot\'s exported snapshot)' : 'incremental (ad hoc request, watermarks) under a paced writer'} | ${fmt(s.rows)} | ${fmt(s.events)} | ${s.seconds.toFixed(1)} | ${fmt(s.rows / s.seconds)} | ${us(s.cpu.bench, s.rows)} | ${us(s.cpu.walsender, s.rows)} | ${us(s.cpu.server, s.rows)} | ${s.writer ? `${fmt(s.writer.rate)}/s for ${s.writer.writeSeconds.toFixed(1)} s: ${fmt(s.writer.p50)} / ${fmt(s.writer.p99)} / ${fmt(s.writer.max)} ms (${s.writer.late} late)` : ''} |`,
    ),
  ].join('\n');
}

export function e2eReport(input: E2eReportInput): string {
  return [
    `Transactions: ${fmt(input.transactions)} (1 draft invoice + 3 lines each${input.pgoutputBytes === null ? '' : `; ${fmt(input.pgoutputBytes)} bytes of pgoutput`}), pre-written into the WAL, drained by each consumer from a slot of its own in ${input.rounds} interleaved round(s) (raw first in each, the others in turn order, reversed in even rounds); a ratio is the round's raw seconds / the consumer's.`,
    '',
    consumerTable(input),
    '',
    '¹ The raw reader, the source-only front half and the assembler run in the bench process (in-process, all its threads — the client\'s native bridge included); the walsender is the backend serving the run\'s slot (its CPU sampled every 25 ms while it lives); the in-memory KurrentDB runs as a process of its own. CPU from /proc/<pid>/stat (utime + stime) and process.cpuUsage(), median over the rounds.',
    '',
    '⁴ The bench process\'s CPU from the moment the assembler was running (its state polled every millisecond until then) to the last acknowledgement: the column before it less the start-up — connecting, checks, contracts, the destination\'s checkpoint read — which a run of this size spreads over its transactions (a longer run, or a running assembler, does not pay it per transaction).',
    '',
    'Each run:',
    '',
    runsTable(input),
    '',
    'Commit-to-append latency (assembler → in-memory KurrentDB at 0 ms). The writer commits each transaction on its schedule inside PostgreSQL (one DO block); "destination": each event\'s commit time in the destination (`created`) − its source commit time, read back from `$all` after the run, first two seconds left out; "assembler": the pipeline\'s own measure when each append resolves (its last 10,000 transactions):',
    '',
    latencyTable(input),
    ...(input.latencies.some((l) => Number.isNaN(l.assemblerP50))
      ? ['', `² Fewer paced transactions than the ${fmt(input.assemblerLagWindow)} the assembler's own percentiles cover: they would include the 2,000 warm-up transactions, written at once and queued.`]
      : []),
    '',
    '³ CPU time of the bench process (utime + stime, all threads) from the start of the paced writes until every event was read back, per paced transaction: the assembler, which is idle once it caught up.',
    '',
    `Snapshots end to end (rows in PostgreSQL → events durable in the in-memory KurrentDB at ${input.snapshotAppendMs} ms per append; invoices and a tenth as many customers; the assembler in the bench process):`,
    '',
    snapshotTable(input),
    ...(input.notes.length ? ['', 'Notes:', ...input.notes.map((n) => `- ${n}`)] : []),
  ].join('\n');
}
