// The KurrentDB sink's options: what a caller may set, parsed once (zod) into the settings the
// sink's steps read. Every problem names the option.
import { z } from 'zod';
import { SinkError } from './errors.js';
import { DEFAULT_RETRY, type RetryPolicy } from './retry.js';
import type { SinkMode } from './types.js';

export const DEFAULT_TIMEOUT_MS = 30_000;

/** KurrentDB's default `MaxAppendSize` (1 MiB). */
export const DEFAULT_MAX_APPEND_SIZE = 1_048_576;

/** The sink logs through this; any structured logger adapts in two lines. */
export interface SinkLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
}

/** Instrumentation points (tests use them to simulate a crash between two appends). */
export interface SinkHooks {
  /** Called before each append request is sent (not before its retries). Throwing aborts the call. */
  beforeAppend?(request: { readonly streams: readonly string[]; readonly events: number; readonly mode: SinkMode }): void | Promise<void>;
}

export interface KurrentDBSinkOptions {
  /** KurrentDB connection string, e.g. `kurrentdb://localhost:2113?tls=false`. */
  readonly connectionString: string;
  /** The assembler's name: stamped in every receipt (one assembler owns its streams) and names the checkpoint stream. */
  readonly assembler: string;
  /**
   * `auto` uses multi-stream append when the server advertises it (KurrentDB 25.1+), else
   * per-stream appends; `multi-stream` fails at start-up when the server lacks it.
   * @default 'auto'
   */
  readonly mode?: 'auto' | 'multi-stream' | 'per-stream';
  /** The server's `MaxAppendSize` in bytes (`Event.SizeOnDisk` summed over one append). @default 1048576 */
  readonly maxAppendSize?: number;
  /** Backoff for destination outages. @default { initialDelayMs: 100, maxDelayMs: 5000 } with unlimited attempts */
  readonly retry?: Partial<RetryPolicy>;
  /**
   * Stream of the assembler's own checkpoint events, appended with (multi-stream) or after
   * (per-stream) each unit's events. `false` turns them off.
   * @default `event-assembler.checkpoint-<assembler>`
   */
  readonly checkpointStream?: string | false;
  /**
   * Longest wait for one call before it counts as failed and is retried. The client's BatchAppend
   * (its per-stream append path) sets no client-side deadline — it relies on the server honouring
   * the deadline sent in the request — so without this a hung server would hang the pipeline.
   * A timed-out write may still land; the retry is then answered by idempotency or the receipt.
   * @default 30000
   */
  readonly timeoutMs?: number;
  /**
   * Streams whose revision and receipt stay cached (a segmented LRU: streams used once are
   * forgotten before streams used again; a forgotten stream's next touch is a first touch again —
   * correct, only slower when the stream exists).
   * @default 100000
   */
  readonly maxCachedStreams?: number;
  /**
   * Stream that carries the stream-state cache over a restart (state-carry.ts): written when the
   * sink closes, read back (once) when the next sink of the assembler starts, so a backlog after
   * downtime does not read every stream's tail again. `false`: every start learns afresh.
   * @default false (the pipeline turns it on: `event-assembler.streams-<assembler>`)
   */
  readonly stateStream?: string | false;
  /** @default silent */
  readonly logger?: SinkLogger;
  readonly hooks?: SinkHooks;
  /**
   * Ends the start-up wait for an unreachable server: when aborted before `createKurrentDBSink`
   * resolves, it rejects with SINK_START_ABORTED at once (the pipeline aborts it on stop and at
   * its start-up deadline). Not used after start-up: in-flight appends end with `close()`.
   */
  readonly startSignal?: AbortSignal;
}

export function checkpointStreamName(assembler: string): string {
  return `event-assembler.checkpoint-${assembler}`;
}

/** Type name of the sink's checkpoint events. */
export const CHECKPOINT_EVENT_TYPE = 'CheckpointRecorded';

const OptionsSchema = z.object({
  connectionString: z.string().min(1, 'give the KurrentDB connection string, e.g. kurrentdb://localhost:2113?tls=false'),
  assembler: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'use letters, digits, "_", "." or "-" (it names a stream and is stamped in receipts)'),
  mode: z.enum(['auto', 'multi-stream', 'per-stream']).optional(),
  maxAppendSize: z.number().int().positive('give the server\'s MaxAppendSize in bytes').optional(),
  retry: z
    .object({
      initialDelayMs: z.number().int().positive().optional(),
      maxDelayMs: z.number().int().positive().optional(),
      maxAttempts: z.number().int().positive().optional(),
    })
    .optional(),
  checkpointStream: z.union([z.string().min(1), z.literal(false)]).optional(),
  timeoutMs: z.number().int().positive().optional(),
  maxCachedStreams: z.number().int().positive().optional(),
  stateStream: z.union([z.string().min(1), z.literal(false)]).optional(),
});

export interface SinkConfig {
  readonly connectionString: string;
  readonly assembler: string;
  readonly mode: 'auto' | 'multi-stream' | 'per-stream';
  readonly maxAppendSize: number;
  readonly retry: RetryPolicy;
  readonly checkpointStream: string | null;
  readonly timeoutMs: number;
  readonly maxCachedStreams: number;
  readonly stateStream: string | null;
}

export function parseOptions(options: KurrentDBSinkOptions): SinkConfig {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(options)'}: ${issue.message}`);
    throw new SinkError('SINK_INVALID_CONFIG', `invalid KurrentDB sink options — ${problems.join('; ')}`, { problems });
  }
  const o = parsed.data;
  const retry: RetryPolicy = {
    initialDelayMs: o.retry?.initialDelayMs ?? DEFAULT_RETRY.initialDelayMs,
    maxDelayMs: o.retry?.maxDelayMs ?? DEFAULT_RETRY.maxDelayMs,
    ...(o.retry?.maxAttempts !== undefined ? { maxAttempts: o.retry.maxAttempts } : {}),
  };
  if (retry.maxDelayMs < retry.initialDelayMs) {
    throw new SinkError('SINK_INVALID_CONFIG', 'invalid KurrentDB sink options — retry.maxDelayMs: must be at least retry.initialDelayMs', { field: 'retry.maxDelayMs' });
  }
  return {
    connectionString: o.connectionString,
    assembler: o.assembler,
    mode: o.mode ?? 'auto',
    maxAppendSize: o.maxAppendSize ?? DEFAULT_MAX_APPEND_SIZE,
    retry,
    checkpointStream: o.checkpointStream === false ? null : (o.checkpointStream ?? checkpointStreamName(o.assembler)),
    timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    maxCachedStreams: o.maxCachedStreams ?? 100_000,
    stateStream: o.stateStream === undefined || o.stateStream === false ? null : o.stateStream,
  };
}
