// Which destination failures are worth waiting out, and how long to wait. Decided here, once,
// for every call the sink makes (STYLE 4).

export interface RetryPolicy {
  /** First backoff delay. @default 100 */
  readonly initialDelayMs: number;
  /** Ceiling of the exponential backoff. @default 5000 */
  readonly maxDelayMs: number;
  /** Attempts per call, the first included. @default unlimited: the pipeline waits (backpressure) and `status()` shows it. */
  readonly maxAttempts?: number;
}

export const DEFAULT_RETRY: RetryPolicy = { initialDelayMs: 100, maxDelayMs: 5_000 };

/**
 * Exponential backoff with "equal jitter": half the step is fixed, half random, so retries of
 * several assemblers spread out without ever retrying immediately. `attempt` counts failures (1, 2, …).
 */
export function backoffDelay(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const step = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(step / 2 + random() * (step / 2));
}

// Client error `type`s (ErrorType in the client's CommandError) that mean "not now", not "no".
const TRANSIENT_TYPES = new Set(['unavailable', 'deadline-exceeded', 'timeout', 'cancelled', 'not-leader']);
// gRPC status codes: CANCELLED 1, DEADLINE_EXCEEDED 4, RESOURCE_EXHAUSTED 8, UNAVAILABLE 14.
const TRANSIENT_CODES = new Set([1, 4, 8, 14]);
const TRANSIENT_NAMES = new Set(['UnavailableError', 'DeadlineExceededError', 'TimeoutError', 'NotLeaderError', 'CancelledError']);
// Transport failures that surface as plain errors (the native read bridge, node sockets) or as
// UNKNOWN from grpc-js on streaming calls.
const TRANSIENT_MESSAGE = /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|connection refused|Connection reset|client error \(Connect\)|No connection established|failed to connect|transport (error|is closing)|write after end|UNAVAILABLE|DEADLINE_EXCEEDED|socket hang up|Server Is Not Ready/i;

// A TLS handshake that failed on what the two sides speak or trust — `tls=true` against a server
// without TLS ("wrong version number", "packet length too long"), a certificate not trusted,
// expired or for another host — fails the same way on every attempt: an answer, not an outage.
// (A connection dropped in the middle of a handshake, as while a server restarts, is none of these.)
const TLS_FAILURE = /wrong version number|packet length too long|unknown protocol|certificate|self[- ]signed|unable to get local issuer|ERR_TLS_CERT|Hostname\/IP does not match|alert (?:unknown ca|bad certificate|handshake failure|protocol version)/i;

/** Whether a KurrentDB client error is a TLS handshake that waiting does not cure. */
export function isTlsFailure(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false;
  const e = error as { message?: unknown; details?: unknown };
  return TLS_FAILURE.test(`${typeof e.message === 'string' ? e.message : ''} ${typeof e.details === 'string' ? e.details : ''}`);
}

/** Whether an error from the KurrentDB client is a destination outage worth retrying. */
export function isTransientError(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false;
  if (isTlsFailure(error)) return false;
  const e = error as { type?: unknown; code?: unknown; name?: unknown; message?: unknown; details?: unknown };
  if (typeof e.type === 'string') {
    if (TRANSIENT_TYPES.has(e.type)) return true;
    if (e.type !== 'unknown') return false; // a definite answer from the server (wrong version, deleted, …)
  }
  if (typeof e.code === 'number' && TRANSIENT_CODES.has(e.code)) return true;
  if (typeof e.name === 'string' && TRANSIENT_NAMES.has(e.name)) return true;
  const text = `${typeof e.message === 'string' ? e.message : ''} ${typeof e.details === 'string' ? e.details : ''}`;
  return TRANSIENT_MESSAGE.test(text);
}
