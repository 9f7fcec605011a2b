/**
 * Start-up's one policy for unreachable servers: PostgreSQL and KurrentDB are both waited for
 * with backoff, each attempt logged with the server, its address and the reason, until they
 * answer, a stop is requested (the wait ends at once), or `lifecycle.startupTimeoutMs` passes
 * (StartupUnavailableError: SOURCE_UNAVAILABLE / DESTINATION_UNAVAILABLE, `run` exits 4).
 * A refusal that waiting does not cure (bad password, unknown database) fails at once.
 */
import { backoffDelay } from '../sink/retry.js'; // the same jittered backoff as the sink's
import type { Logger } from './logger.js';
import { SourceConnectionError, StartupUnavailableError, type UnavailableServer } from './errors.js';
import { StopBeforeStart, type RunControl } from './run-control.js';
import { connectSource } from '../source/connect-source.js';
import { describeSourceHosts, parseSourceHosts } from '../source/multi-host.js';

/** Start-up's wait: aborted on stop or when the deadline passes (then `expired`). */
export interface StartupGuard {
  readonly signal: AbortSignal;
  readonly expired: boolean;
  readonly startedAt: number;
  /** Start-up is over (the deadline no longer applies). */
  dispose(): void;
}

export function createStartupGuard(control: RunControl, timeoutMs: number | null): StartupGuard {
  const aborter = new AbortController();
  const startedAt = Date.now();
  let expired = false;
  const onStop = (): void => aborter.abort();
  control.signal.addEventListener('abort', onStop, { once: true });
  if (control.signal.aborted) aborter.abort();
  const timer = timeoutMs === null ? null : setTimeout(() => {
    expired = true;
    aborter.abort();
  }, timeoutMs);
  timer?.unref?.();
  return {
    signal: aborter.signal,
    get expired() {
      return expired;
    },
    startedAt,
    dispose() {
      if (timer) clearTimeout(timer);
      control.signal.removeEventListener('abort', onStop);
    },
  };
}

/** Start-up backoff: 250 ms doubling to 5 s, with jitter. */
const STARTUP_RETRY = { initialDelayMs: 250, maxDelayMs: 5_000 };

// Socket and server states that mean "not reachable yet": refused, reset, unresolvable, timed
// out; the server starting up (57P03), shutting down or crashing while the connection was being
// made (57P01 admin_shutdown — also "unexpected postmaster exit" —, 57P02 crash_shutdown), out of
// connections (53300), and the connection exceptions of class 08.
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND', 'EPIPE', '57P01', '57P02', '57P03', '53300']);
const UNREACHABLE_MESSAGE = /timeout expired|Connection terminated|terminating connection due to|ECONNREFUSED|ECONNRESET|ETIMEDOUT|the database system is (starting up|shutting down|in recovery mode)/i;

/** Whether a PostgreSQL connection error is worth waiting out. */
export function isPostgresUnreachable(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || code.startsWith('08'))) return true;
  const nested = (error as { errors?: unknown }).errors; // AggregateError: every address of a host refused
  if (Array.isArray(nested) && nested.length > 0 && nested.every(isPostgresUnreachable)) return true;
  return UNREACHABLE_MESSAGE.test(error instanceof Error ? error.message : String(error));
}

function reasonOf(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown; errors?: unknown };
  const message = typeof e?.message === 'string' && e.message !== '' ? e.message : Array.isArray(e?.errors) ? e.errors.map(reasonOf).join('; ') : String(error);
  return typeof e?.code === 'string' && !message.includes(e.code) ? `${e.code}: ${message}` : message;
}

/** host:port of a postgres:// URL or a key=value connection string, for log lines (never its password). */
export function postgresAddress(connection: string): string {
  try {
    const hosts = parseSourceHosts(connection).hosts;
    if (hosts.length > 1) return describeSourceHosts(connection);
  } catch {
    // not a valid host list: the single-host reading below
  }
  if (/^postgres(ql)?:\/\//i.test(connection)) {
    // A user with no host (`postgres://user:pw@/db?host=/socket/dir`) is no WHATWG URL; pg reads
    // it as the socket form, so read it with a placeholder host that ?host= then overrides.
    for (const text of [connection, connection.replace(/@\//, '@localhost/')]) {
      try {
        const url = new URL(text);
        const host = url.searchParams.get('host') ?? url.hostname;
        return `${host || 'localhost'}:${url.searchParams.get('port') || url.port || '5432'}`;
      } catch {
        // next form
      }
    }
  }
  const host = /(?:^|\s)host=(\S+)/.exec(connection)?.[1] ?? 'localhost';
  const port = /(?:^|\s)port=(\S+)/.exec(connection)?.[1] ?? '5432';
  return `${host}:${port}`;
}

/**
 * Runs `attempt` until it succeeds, waiting out failures `transient` says are unreachability.
 * Ends with StopBeforeStart on stop, StartupUnavailableError at the deadline.
 */
export async function retryAtStartup<T>(
  server: { readonly name: UnavailableServer; readonly address: string },
  attempt: () => Promise<T>,
  options: { readonly guard: StartupGuard; readonly log: Logger; readonly transient: (error: unknown) => boolean; readonly refused?: (error: unknown) => Error },
): Promise<T> {
  const { guard, log } = options;
  for (let n = 1; ; n++) {
    let failure: unknown;
    try {
      return await attempt();
    } catch (error) {
      if (!options.transient(error)) throw options.refused ? options.refused(error) : error;
      failure = error;
    }
    const delayMs = backoffDelay(STARTUP_RETRY, n);
    if (!guard.signal.aborted) {
      log.warn(`start-up: ${server.name} unreachable, retrying`, { server: server.name, address: server.address, reason: reasonOf(failure), attempt: n, delayMs });
      await abortableSleep(delayMs, guard.signal);
    }
    if (guard.signal.aborted) {
      if (!guard.expired) throw new StopBeforeStart();
      throw new StartupUnavailableError({ server: server.name, address: server.address, waitedMs: Date.now() - guard.startedAt, reason: reasonOf(failure) });
    }
  }
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Waits until PostgreSQL accepts the capture role's connection (one `SELECT 1`). */
export function reachPostgres(connection: string, guard: StartupGuard, log: Logger): Promise<void> {
  const address = postgresAddress(connection);
  return retryAtStartup(
    { name: 'PostgreSQL', address },
    async () => {
      const client = await connectSource(connection, { extra: { connectionTimeoutMillis: 10_000 }, signal: guard.signal });
      try {
        await client.query('SELECT 1');
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    {
      guard,
      log,
      transient: (error) => guard.signal.aborted || isPostgresUnreachable(error),
      // The server's own words; its SQLSTATE goes alongside, not in front of them.
      refused: (error) => new SourceConnectionError(address, error instanceof Error && error.message !== '' ? error.message : reasonOf(error), typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : null),
    },
  );
}
