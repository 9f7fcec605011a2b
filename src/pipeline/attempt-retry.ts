/**
 * A run attempt that ended because PostgreSQL went away outside the replication stream — a
 * restart or a dropped connection while the initial snapshot reads at its exported snapshot,
 * while an incremental snapshot writes a watermark or reads a chunk, or during a start-up query —
 * is followed by a new attempt in the same process, as a restart of the process would be: the
 * start decision then resumes the snapshot (same generation) from what is durable, and streaming
 * goes on from the checkpoint. (The replication stream reconnects by itself: replication/.)
 * Deliberate diagnoses — an EventAssemblerError names its code and fix — are never retried.
 */
import { EventAssemblerError } from '../errors.js';
import { isRetryable } from '../source/replication/reconnect-policy.js';

/** Whether `error` (a failed attempt's) is PostgreSQL going away rather than an answer. */
export function isSourceConnectionLoss(error: unknown): boolean {
  if (error instanceof EventAssemblerError) return false;
  if (isRetryable(error)) return true;
  // node-postgres, on a query sent after its socket failed.
  return error instanceof Error && /Client has encountered a connection error and is not queryable/.test(error.message);
}

/**
 * Whether a failed attempt is followed by a new one: a connection loss (above), when the assembler
 * opened its source and sink itself (a caller's cannot be opened again).
 */
export function startsOverAfter(error: unknown, deps: { readonly source?: unknown; readonly sink?: unknown }): boolean {
  return !deps.source && !deps.sink && isSourceConnectionLoss(error);
}

/** First pause before the next attempt; doubles per failure in a row, up to `ATTEMPT_RETRY_MAX_MS`. */
export const ATTEMPT_RETRY_INITIAL_MS = 500;
export const ATTEMPT_RETRY_MAX_MS = 30_000;
/** An attempt that lasted this long before failing starts the pauses over. */
const ATTEMPT_RETRY_RESET_MS = 60_000;

/** The pause before attempt number `failures + 1` after `failures` connection losses in a row. */
export function attemptRetryDelay(failures: number): number {
  return Math.min(ATTEMPT_RETRY_MAX_MS, ATTEMPT_RETRY_INITIAL_MS * 2 ** Math.max(0, failures - 1));
}

/** Counts connection losses in a row: a long attempt in between starts the count over. */
export function createAttemptRetries(now: () => number = Date.now) {
  let failures = 0;
  let startedAt = now();
  return {
    started(): void {
      startedAt = now();
    },
    /** A failed attempt: the pause before the next one. */
    failed(): { readonly delayMs: number; readonly failures: number } {
      if (now() - startedAt >= ATTEMPT_RETRY_RESET_MS) failures = 0;
      failures += 1;
      return { delayMs: attemptRetryDelay(failures), failures };
    },
  };
}
