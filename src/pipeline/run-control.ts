/**
 * A run's stop and failure: the one place that knows whether the line should stop, and why.
 *
 * Every wait of the pipeline — start-up retries, backoff, the appender's capacity, the next
 * transaction — goes through `until()` or `sleep()` (or hands `signal` on), so a stop request
 * ends it at once instead of after the wait (issue 13: SIGTERM during a destination outage at
 * start-up used to keep retrying for minutes). The first fatal error wins and stops the line.
 */
import type { Redactor } from '../config/redact.js';
import { EventAssemblerError } from '../errors.js';
import type { Logger } from './logger.js';

export interface RunControl {
  /** A stop was requested (by `stop()`, a fatal error, or the end of an `initial_only` snapshot). */
  readonly stopRequested: boolean;
  /** The first fatal error (redacted), or `null`. */
  readonly fatal: unknown;
  /** Aborted when a stop is requested: hand it to waits that take one. */
  readonly signal: AbortSignal;
  /** Requests a stop: every wait through this control ends. */
  requestStop(): void;
  /** Records a fatal error (the first one wins), logs it and requests a stop. */
  fail(error: unknown): void;
  /**
   * The drain deadline passed, or another process took the slot: what is still in flight is given
   * up (not acknowledged; the slot sends it again on the next start, or to the new leader).
   * Failures of it from now on — the sinks are closed under it — are expected, not fatal.
   */
  abandon(): void;
  readonly abandoned: boolean;
  /** `promise`, or `'stop'` as soon as a stop is requested. */
  until<T>(promise: Promise<T>): Promise<T | 'stop'>;
  /** Waits `ms`, or less when a stop is requested; resolves `true` when stopped. */
  sleep(ms: number): Promise<boolean>;
}

/** A stable code and the message of any error, for log lines and status. */
export function errorInfo(error: unknown): { code: string | null; message: string } {
  const code = error instanceof EventAssemblerError ? error.code : typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : null;
  return { code, message: error instanceof Error ? error.message : String(error) };
}

/**
 * `startsOver` says which errors end only this attempt (a new one follows: attempt-retry.ts); those
 * are logged as a warning, not as the fatal error that stops the assembler.
 */
export function createRunControl(log: Logger, redactor: Redactor, startsOver: (error: unknown) => boolean = () => false): RunControl {
  let stopRequested = false;
  let fatal: unknown = null;
  let abandoned = false;
  const aborter = new AbortController();
  /**
   * Waits racing a stop request. Not `Promise.race([p, stopSignal])` per transaction: every race
   * leaves a reaction on the never-settling stop promise, one per transaction for the life of
   * the run — garbage the collector must keep copying (it showed as the pipeline's extra GC).
   */
  const waiters = new Set<(value: 'stop') => void>();

  function requestStop(): void {
    stopRequested = true;
    if (aborter.signal.aborted) return;
    aborter.abort();
    for (const wake of [...waiters]) wake('stop');
    waiters.clear();
  }

  function until<T>(promise: Promise<T>): Promise<T | 'stop'> {
    if (aborter.signal.aborted) return Promise.resolve('stop');
    return new Promise<T | 'stop'>((resolve, reject) => {
      waiters.add(resolve);
      promise.then(
        (value) => {
          waiters.delete(resolve);
          resolve(value);
        },
        (error: unknown) => {
          waiters.delete(resolve);
          reject(error);
        },
      );
    });
  }

  return {
    get stopRequested() {
      return stopRequested;
    },
    get fatal() {
      return fatal;
    },
    signal: aborter.signal,
    requestStop,
    get abandoned() {
      return abandoned;
    },
    abandon() {
      abandoned = true;
      requestStop();
    },
    fail(error) {
      if (fatal || abandoned) return;
      fatal = redactor.error(error);
      if (startsOver(error)) log.warn('run attempt: PostgreSQL connection lost, ending this attempt (a new one follows)', { error: errorInfo(error) });
      else log.error('assembler: fatal error, stopping', { error: errorInfo(error) });
      requestStop();
    },
    until,
    async sleep(ms) {
      if (aborter.signal.aborted) return true;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = await until(new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))));
      clearTimeout(timer);
      return done === 'stop';
    },
  };
}

/** A stop arrived (or `initial_only` finished) during start-up: skip to the orderly close. */
export class StopBeforeStart extends Error {}
