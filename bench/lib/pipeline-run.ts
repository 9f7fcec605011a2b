/**
 * The assembler (`createAssembler`) draining a pre-written slot, timed from creation until the
 * slot has been told the last transaction is durable (`status().lag.acknowledgedLsn`), and the
 * commit → durable of each event, read back from the destination after a run.
 */
import { fileURLToPath } from 'node:url';
import { KurrentDBClient, streamNameFilter, START } from '@kurrent/kurrentdb-client';
import { mappers } from '../../examples/invoicing/index.js';
import type { Assembler } from '../../src/pipeline/index.js';
import type { Sink } from '../../src/sink/index.js';
import { compareLsn, createAssembler, silentLogger } from './subject.js';
import { TABLES } from './invoicing-db.js';

export const CONTRACTS_DIR = fileURLToPath(new URL('../../contracts/invoicing', import.meta.url));
/** Experiments: EA_BENCH_LIMITS='{"maxInFlightTransactions":4000}' sets the configuration's `limits` (defaults otherwise), here, in snapshot-runs.ts and in snapshot-process.ts. */
export const BENCH_LIMITS = process.env.EA_BENCH_LIMITS ? (JSON.parse(process.env.EA_BENCH_LIMITS) as Record<string, number>) : null;

/** Accepts every batch at once: the pipeline without a destination. */
export const nullSink: Sink = {
  append: async (batch) => ({ appended: batch.events.length, skipped: 0, streams: [], checkpoint: 'none', mode: 'multi-stream' }),
  close: async () => undefined,
};

export interface PipelineTarget {
  readonly captureUrl: string;
  readonly slot: string;
  readonly publication: string;
  /** KurrentDB connection string; ignored with `sink`. */
  readonly destination?: string;
  readonly sink?: Sink;
}

export function benchAssembler(target: PipelineTarget): Assembler {
  return createAssembler(
    {
      name: `bench-${target.slot}`,
      source: { connection: target.captureUrl, slot: target.slot, publication: target.publication, tables: [...TABLES] },
      // With a custom sink the destination is never contacted; the field is still required.
      destination: { connectionString: target.destination ?? 'kurrentdb://127.0.0.1:1?tls=false' },
      mappers,
      contracts: { dir: CONTRACTS_DIR },
      ...(BENCH_LIMITS ? { limits: BENCH_LIMITS } : {}),
    },
    { logger: silentLogger, ...(target.sink ? { sink: target.sink } : {}) },
  );
}

export interface PipelineDrainResult {
  readonly seconds: number;
  readonly markSeconds: number;
  readonly events: number;
  readonly mode: string | null;
  /** Seconds until the assembler was running (start-up checks done) and until its first acknowledgement. */
  readonly runningSeconds: number;
  /** CPU seconds of this process (all threads) from creating the assembler until it was running: its start-up (polled every millisecond until then). */
  readonly startupCpuSeconds: number;
  readonly firstAckSeconds: number;
  /** Group commit: append calls and transactions per call. */
  readonly batching: unknown;
}

/**
 * Runs the assembler until the slot is acknowledged up to `lastEndLsn`, noting when it passed
 * `markLsn`. `onAcknowledged` runs then, before the assembler stops (e.g. to read the CPU time of
 * the walsender while it still lives).
 */
export async function drainPipeline(target: PipelineTarget, markLsn: string, lastEndLsn: string, timeoutMs = 900_000, onAcknowledged?: () => Promise<void>): Promise<PipelineDrainResult> {
  const started = process.hrtime.bigint();
  const cpuAtStart = process.cpuUsage();
  let startupCpuSeconds = 0;
  const elapsed = () => Number(process.hrtime.bigint() - started) / 1e9;
  const assembler = benchAssembler(target);
  const running = assembler.run();
  let failure: unknown = null;
  running.catch((error: unknown) => (failure = error));
  let markSeconds = 0;
  let runningSeconds = 0;
  let firstAckSeconds = 0;
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      if (failure) throw failure;
      const status = assembler.status();
      const acked = status.lag.acknowledgedLsn;
      if (!runningSeconds && status.state === 'running') {
        runningSeconds = elapsed();
        const used = process.cpuUsage(cpuAtStart);
        startupCpuSeconds = (used.user + used.system) / 1e6;
      }
      if (!firstAckSeconds && acked) firstAckSeconds = elapsed();
      if (acked && markSeconds === 0 && compareLsn(acked, markLsn) >= 0) markSeconds = elapsed();
      if (acked && compareLsn(acked, lastEndLsn) >= 0) break;
      if (Date.now() > deadline) throw new Error(`assembler on ${target.slot}: acknowledged ${acked} of ${lastEndLsn} within ${timeoutMs} ms`);
      // Every millisecond until it runs, so the start-up's CPU takes in little of the stream.
      await new Promise((resolve) => setTimeout(resolve, runningSeconds ? 10 : 1));
    }
    const seconds = elapsed();
    await onAcknowledged?.();
    if (markSeconds === 0) markSeconds = seconds;
    const status = assembler.status();
    return { seconds, markSeconds, events: status.events.appended, mode: status.mode, runningSeconds, startupCpuSeconds, firstAckSeconds, batching: status.batching };
  } finally {
    await assembler.stop();
  }
}

/**
 * Commit → durable of every event in streams starting with `prefix`, in ms, in the destination's
 * log order: the time the destination stored the event (its `created`, which the server sets when
 * it commits the append) minus `source.commitTime` in the event's metadata (same machine, same
 * clock). Read once the run is over, by a catch-up subscription to `$all` from the start (not a
 * read: the client's native reader gives `created` in whole seconds), so nothing observes the run
 * while it runs — a live subscriber cost the 2 cores ≈ 0.2 of one at 5,000 events/s. Resolves
 * when `expected` events were seen, or after `timeoutMs`; `drainSeconds` is how long that took.
 */
export async function commitToDurable(connectionString: string, prefix: string, expected: number, timeoutMs: number): Promise<{ samples: number[]; drainSeconds: number }> {
  const client = KurrentDBClient.connectionString(connectionString);
  const started = Date.now();
  const samples: number[] = [];
  const subscription = client.subscribeToAll({ fromPosition: START, filter: streamNameFilter({ prefixes: [prefix] }) });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, timeoutMs);
      subscription.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      subscription.on('data', (resolved) => {
        const event = resolved.event;
        if (!event) return;
        let metadata = event.metadata as unknown;
        if (metadata instanceof Uint8Array) metadata = JSON.parse(Buffer.from(metadata).toString('utf8'));
        const commitTime = (metadata as Record<string, string> | undefined)?.['source.commitTime'];
        const committed = commitTime ? Date.parse(commitTime) : Number.NaN;
        if (Number.isFinite(committed)) samples.push(event.created.getTime() - committed);
        if (samples.length >= expected) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    return { samples, drainSeconds: (Date.now() - started) / 1000 };
  } finally {
    await subscription.unsubscribe().catch(() => undefined);
    await client.dispose().catch(() => undefined);
  }
}

/** The largest value (`Math.max(...values)` overflows the stack past ~100,000 values: a soak has millions). */
export function maxOf(values: readonly number[]): number {
  let max = -Infinity;
  for (const v of values) if (v > max) max = v;
  return max;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
