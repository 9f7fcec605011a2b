/**
 * When a lost replication connection is tried again, and after how long: which failures are
 * retryable (connection loss, server restarts), which mean the slot is streamed by another
 * connection (a standby's wait: polled at a fixed interval), and which are fatal (a
 * ReplicationError, anything else, or too many failed attempts in a row), and the exponential
 * backoff with jitter between attempts. Pure: no timers, no I/O — the stream (stream.ts) acts on
 * its answers.
 */
import { ReplicationError, SlotActiveError, slotActivePid } from './errors.js';

export interface BackoffOptions {
  /** First delay before reconnecting. Default: 500 ms. */
  readonly initialMs: number;
  /** Upper bound of a delay. Default: 30 000 ms. */
  readonly maxMs: number;
  /** Growth factor per failed attempt. Default: 2. */
  readonly multiplier: number;
  /** Random spread, 0..1: a delay d becomes d × (1 − jitter × random). Default: 0.5. */
  readonly jitter: number;
  /** Failed attempts in a row before giving up with an error. Default: unlimited. */
  readonly maxAttempts: number;
}

/** How often a reader whose slot is streamed by another connection asks again. */
export const DEFAULT_SLOT_POLL_INTERVAL_MS = 1_000;

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 30_000, multiplier: 2, jitter: 0.5, maxAttempts: Number.POSITIVE_INFINITY };

/** Delay before reconnect attempt number `attempt` (0-based): exponential, capped, with jitter. */
export function backoffDelay(attempt: number, backoff: BackoffOptions, random: () => number = Math.random): number {
  const raw = Math.min(backoff.maxMs, backoff.initialMs * backoff.multiplier ** attempt);
  return Math.max(0, Math.round(raw * (1 - backoff.jitter * random())));
}

/** SQLSTATEs that mean "the server or connection went away, try again". */
const RETRYABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend, smart/fast shutdown)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, recovering)
  '53300', // too_many_connections
  '55006', // object_in_use: "replication slot … is active for PID …" — the previous walsender is still exiting
  '08000', '08003', '08006', '08001', '08004', // connection exceptions
]);

/** True when `error` means the server or the connection went away (a SQLSTATE, a socket error code or message). */
export function isRetryable(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (e && typeof e.code === 'string') {
    if (RETRYABLE_SQLSTATES.has(e.code)) return true;
    if (/^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN)$/.test(e.code)) return true;
  }
  const message = e && typeof e.message === 'string' ? e.message : String(error);
  return /Connection terminated|terminating connection|the database system is (starting up|shutting down|in recovery)|server closed the connection|socket hang up|ECONNRESET|ECONNREFUSED/i.test(message);
}

/**
 * What a failed session means: `slot-active` — the slot is streamed by another connection (55006
 * "replication slot … is active for PID …"; waiting is the cure, not a backoff); `retryable` — the
 * server or the connection went away; `fatal` — anything else.
 */
export type FailureKind = 'slot-active' | 'retryable' | 'fatal';

export function classifyFailure(error: unknown): FailureKind {
  if (error instanceof SlotActiveError || slotActivePid(error) !== null) return 'slot-active';
  if (error instanceof ReplicationError) return 'fatal';
  return isRetryable(error) ? 'retryable' : 'fatal';
}

/** The policy's answer to a failed session. */
export type FailureDecision =
  | { readonly action: 'fail' }
  /** Connection loss: reconnect after the (growing) backoff delay. */
  | { readonly action: 'reconnect'; readonly delayMs: number; readonly attempt: number }
  /** The slot is streamed by another connection: ask again after the fixed poll interval; the backoff does not grow. */
  | { readonly action: 'poll'; readonly delayMs: number };

export interface ReconnectPolicy {
  /** The one decision per failed session: fail, reconnect with backoff, or poll a busy slot. */
  afterFailure(error: Error): FailureDecision;
  /** Whether a session that failed with `error` ends the stream for good instead of being retried. */
  isFatal(error: Error): boolean;
  /** Schedules the next attempt: its delay and its number (1-based, counting failures in a row); counted as a reconnect. */
  next(): { readonly delayMs: number; readonly attempt: number };
  /** A session reached streaming: the next failure starts the backoff over. */
  reset(): void;
  /** Reconnects scheduled so far. */
  readonly reconnects: number;
}

export function createReconnectPolicy(backoff: BackoffOptions, random: () => number = Math.random, slotPollIntervalMs = DEFAULT_SLOT_POLL_INTERVAL_MS): ReconnectPolicy {
  let attempt = 0;
  let reconnects = 0;
  function isFatal(error: Error): boolean {
    const kind = classifyFailure(error);
    // A busy slot is never given up on (nor counted against maxAttempts): another process streams it.
    return kind === 'fatal' || (kind === 'retryable' && attempt + 1 > backoff.maxAttempts);
  }
  function next(): { delayMs: number; attempt: number } {
    const delayMs = backoffDelay(attempt, backoff, random);
    attempt += 1;
    reconnects += 1;
    return { delayMs, attempt };
  }
  return {
    afterFailure(error) {
      if (isFatal(error)) return { action: 'fail' };
      if (classifyFailure(error) === 'slot-active') {
        reconnects += 1;
        return { action: 'poll', delayMs: slotPollIntervalMs };
      }
      return { action: 'reconnect', ...next() };
    },
    isFatal,
    next,
    reset() {
      attempt = 0;
    },
    get reconnects() {
      return reconnects;
    },
  };
}
