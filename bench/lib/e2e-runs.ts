/**
 * The consumers `npm run bench` compares (bench/run.ts), each draining a slot of its own over the
 * same pre-written WAL, with the CPU time of each process over the drain (cpu-watch.ts): this
 * process — where the raw reader, the source-only front half and the assembler run — the
 * walsender serving the slot, and the in-memory KurrentDB (a process of its own). Several rounds
 * run interleaved; each round's ratios are to that round's raw reader.
 */
import type { BenchDatabase } from './invoicing-db.js';
import { PUBLICATION } from './invoicing-db.js';
import { watchCpu, type RunCpu } from './cpu-watch.js';
import { startKurrentDBProcess } from './kurrentdb-server.js';
import { drainPipeline, nullSink } from './pipeline-run.js';
import { drainRaw, type RawDrainResult } from './raw-reader.js';
import { drainSourceOnly } from './source-only.js';

export type ConsumerKind = 'raw' | 'source-only' | 'null-sink' | 'memory-0ms' | 'memory-2ms';

export const CONSUMERS: readonly { readonly kind: ConsumerKind; readonly label: string; readonly target: string; readonly latencyMs?: number }[] = [
  { kind: 'raw', label: 'raw pgoutput reader (receive + discard)', target: '' },
  { kind: 'source-only', label: 'source only: decode + buffer + map + validate, no sink', target: '' },
  { kind: 'null-sink', label: 'assembler, null sink', target: '≥ 0.8' },
  { kind: 'memory-0ms', label: 'assembler → in-memory KurrentDB, 0 ms per append', target: '—', latencyMs: 0 },
  { kind: 'memory-2ms', label: 'assembler → in-memory KurrentDB, 2 ms per append', target: '≥ 0.6', latencyMs: 2 },
];

export interface ConsumerRun {
  readonly round: number;
  readonly kind: ConsumerKind;
  readonly seconds: number;
  readonly cpu: RunCpu;
  /** Assembler runs: seconds until it was running, and this process's CPU seconds until then. */
  readonly startupSeconds?: number;
  readonly startupCpuSeconds?: number;
  readonly raw?: RawDrainResult;
}

/** The slot of `kind` in `round` (created before the WAL is written). */
export const slotOf = (kind: ConsumerKind, round: number): string => `${kind.replace(/-/g, '_')}_r${round}`;

export interface DrainContext {
  readonly db: BenchDatabase;
  readonly captureUrl: string;
  readonly transactions: number;
  readonly mark: number;
  /** From the first raw run: the mark's and the last commit's end LSNs. */
  lsns?: { readonly mark: string; readonly last: string };
}

/** Drains the slot of `kind` in `round`; raw runs first in round 1 (the others need its LSNs). */
export async function runConsumer(kind: ConsumerKind, round: number, ctx: DrainContext): Promise<ConsumerRun> {
  const slot = slotOf(kind, round);
  const consumer = CONSUMERS.find((c) => c.kind === kind)!;
  const kurrent = consumer.latencyMs === undefined ? null : await startKurrentDBProcess(consumer.latencyMs);
  const cpu = watchCpu({ slot, query: (sql, params) => ctx.db.query(sql, params), serverPid: kurrent?.pid ?? null });
  try {
    if (kind === 'raw') {
      const raw = await drainRaw(ctx.db.connection, slot, PUBLICATION, ctx.transactions, ctx.mark);
      ctx.lsns ??= { mark: raw.markLsn, last: raw.lastEndLsn };
      return { round, kind, seconds: raw.seconds, cpu: await cpu.stop(), raw };
    }
    if (kind === 'source-only') {
      const src = await drainSourceOnly(ctx.db.connection, slot, PUBLICATION, ctx.transactions, ctx.mark);
      return { round, kind, seconds: src.seconds, cpu: await cpu.stop() };
    }
    if (!ctx.lsns) throw new Error('bench: the raw reader runs first (its LSNs tell the assembler runs when they are done)');
    let measured: RunCpu | null = null;
    const result = await drainPipeline(
      { captureUrl: ctx.captureUrl, slot, publication: PUBLICATION, ...(kurrent ? { destination: kurrent.connectionString } : { sink: nullSink }) },
      ctx.lsns.mark,
      ctx.lsns.last,
      undefined,
      async () => {
        measured = await cpu.stop();
      },
    );
    return { round, kind, seconds: result.seconds, cpu: measured ?? (await cpu.stop()), startupSeconds: result.runningSeconds, startupCpuSeconds: result.startupCpuSeconds };
  } finally {
    await kurrent?.stop();
  }
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length === 0 ? Number.NaN : sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export interface ConsumerSummary {
  readonly kind: ConsumerKind;
  readonly label: string;
  readonly target: string;
  readonly medianSeconds: number;
  /** Raw seconds / this consumer's seconds, per round (same round's raw run). */
  readonly ratios: readonly number[];
  readonly medianRatio: number;
  /** Median CPU µs per transaction, per process. */
  readonly cpuUs: { readonly bench: number; readonly walsender: number; readonly server: number };
  /** Median CPU µs per transaction of the bench process once the assembler was running (its start-up left out). */
  readonly benchRunningCpuUs: number;
  readonly startupSeconds: number;
}

export function summarize(runs: readonly ConsumerRun[], transactions: number): ConsumerSummary[] {
  const rawOf = (round: number) => runs.find((r) => r.kind === 'raw' && r.round === round)?.seconds;
  const perTx = (values: readonly (number | null)[]) => {
    const known = values.filter((v): v is number => v !== null && !Number.isNaN(v));
    return known.length === 0 ? Number.NaN : (median(known) * 1e6) / transactions;
  };
  return CONSUMERS.map(({ kind, label, target }) => {
    const own = runs.filter((r) => r.kind === kind);
    const ratios = own.flatMap((r) => {
      const raw = rawOf(r.round);
      return raw ? [raw / r.seconds] : [];
    });
    return {
      kind,
      label,
      target,
      medianSeconds: median(own.map((r) => r.seconds)),
      ratios,
      medianRatio: median(ratios),
      cpuUs: { bench: perTx(own.map((r) => r.cpu.bench)), walsender: perTx(own.map((r) => r.cpu.walsender)), server: perTx(own.map((r) => r.cpu.server)) },
      benchRunningCpuUs: perTx(own.map((r) => (r.startupCpuSeconds === undefined ? null : r.cpu.bench - r.startupCpuSeconds))),
      startupSeconds: median(own.flatMap((r) => (r.startupSeconds === undefined ? [] : [r.startupSeconds]))),
    };
  });
}
