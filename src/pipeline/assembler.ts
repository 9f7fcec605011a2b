/**
 * The running pipeline: source → buffer → mapping → contracts → sink, with the checkpoint
 * coordinator deciding what the slot may forget. This file is the wiring and the lifecycle only;
 * each step is a file of its own:
 *
 * | step | file |
 * |---|---|
 * | one run attempt: start-up to close, with the state that must be fresh on taking the slot | run-attempt.ts |
 * | stop and failure of a run; every wait ends on stop | run-control.ts |
 * | start-up: servers waited for, destination opened | startup.ts, destination-start.ts |
 * | hot standby: wait while another process streams the slot; the role | standby.ts |
 * | start decision: checkpoint vs slot, resume / refuse / new generation | start-decision.ts, snapshot-start.ts |
 * | snapshots: initial phase, incremental windows, ad hoc requests | initial-snapshot.ts, snapshot-requests.ts, snapshot-state.ts |
 * | the transaction loop and where each transaction goes | run-loop.ts, transaction-router.ts |
 * | transaction handling: map → validate → park/halt → enqueue | transaction-handler.ts, large-units.ts, slices.ts |
 * | appending on lanes with group commit | appender.ts |
 * | checkpoints: record the durable prefix, then acknowledge | checkpoint-coordinator.ts, checkpoint-writer.ts |
 * | status and run summary | status.ts, run-stats.ts |
 *
 * When the contiguous prefix of durable transactions advances, a checkpoint record is appended
 * to `event-assembler.checkpoint-<name>` and only then is the slot acknowledged — so the slot's
 * confirmed_flush_lsn is never ahead of the destination's record, which is what the start-up
 * check relies on to detect that someone else advanced the slot (DESIGN invariant 7).
 *
 * A process runs attempt after attempt while it loses the slot to another process (a standby
 * that took over while this one was reconnecting): each new attempt starts as a standby with
 * fresh state (standby.ts, run-attempt.ts). Also when PostgreSQL went away where nothing
 * reconnects — a snapshot's own connections, start-up queries — a new attempt starts after a
 * pause, as a restart of the process would (attempt-retry.ts).
 */
import { parseConfig, type AssemblerConfig, type ResolvedConfig } from '../config/schema.js';
import { createObservability, type Observability } from '../observability/observability.js';
import { createAttemptRetries, startsOverAfter } from './attempt-retry.js';
import { createLogger, type Logger } from './logger.js';
import { createRunAttempt, type RunAttempt } from './run-attempt.js';
import { errorInfo } from './run-control.js';
import { createRunStats } from './run-stats.js';
import { createStandbyTracker } from './standby.js';
import type { Assembler, AssemblerDeps, RunSummary } from './types.js';

export type { Assembler, AssemblerDeps, AssemblerRole, AssemblerState, AssemblerStatus, RunSummary, SnapshotSummary } from './types.js';

function isResolved(config: AssemblerConfig | ResolvedConfig): config is ResolvedConfig {
  return typeof (config as ResolvedConfig).redactor === 'object' && Array.isArray((config as ResolvedConfig).source?.tables) && typeof (config as ResolvedConfig).source.connection === 'string';
}

/** Every line through the configuration's redactor: no secret reaches a log. */
function redactingLogger(base: Logger, redactor: ResolvedConfig['redactor']): Logger {
  return {
    info: (m, f) => base.info(redactor.text(m), redactor.fields(f)),
    warn: (m, f) => base.warn(redactor.text(m), redactor.fields(f)),
    error: (m, f) => base.error(redactor.text(m), redactor.fields(f)),
  };
}

/** Builds the pipeline from a configuration (validated here: throws `ConfigError` naming the field). */
export function createAssembler(input: AssemblerConfig | ResolvedConfig, deps: AssemblerDeps = {}): Assembler {
  const config = isResolved(input) ? input : parseConfig(input);
  const log = redactingLogger(deps.logger ?? createLogger(), config.redactor);
  // The listener outlives attempts: a standby serves its signals (role standby) while it waits.
  const observability: Observability | null = config.observability
    ? createObservability({
        name: config.name, slot: config.source.slot, connection: config.source.connection, mappers: config.mappers.map((m) => m.name),
        ...config.observability, log, status: () => attempt.status(),
      })
    : null;
  const shared = {
    config, deps, log, stats: createRunStats(), startedAt: Date.now(), standby: createStandbyTracker(log, config.source.slot),
    ...(observability ? { observeAppend: observability.observeAppend } : {}),
  };
  let attempt: RunAttempt = createRunAttempt(shared);
  let runPromise: Promise<RunSummary> | null = null;
  let stopRequested = false;
  let listening = false;
  const retries = createAttemptRetries();
  /** The pause before a new attempt; a stop ends it at once. */
  let wake: (() => void) | null = null;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = null;
        resolve();
      }
      wake = done;
    });

  async function runAttempts(): Promise<RunSummary> {
    try {
      if (observability) {
        await observability.start();
        listening = true;
      }
      for (;;) {
        retries.started();
        let result: Awaited<ReturnType<RunAttempt['run']>>;
        try {
          result = await attempt.run();
        } catch (error) {
          // PostgreSQL went away where nothing reconnects (a snapshot's own connections, start-up
          // queries): start over in this process, as a restart would (attempt-retry.ts).
          if (stopRequested || !startsOverAfter(error, deps)) throw error;
          const { delayMs, failures } = retries.failed();
          log.warn('PostgreSQL connection lost outside the replication stream: starting over as after a restart (a snapshot resumes from what is durable)', {
            error: errorInfo(error), delayMs, failures,
          });
          await pause(delayMs);
          attempt = createRunAttempt(shared);
          if (stopRequested) attempt.stop();
          continue;
        }
        const { summary, lostSlot } = result;
        // A source or sink given by the caller cannot be opened again: a lost slot ends the run.
        if (!lostSlot || stopRequested || deps.source || deps.sink) return summary;
        attempt = createRunAttempt(shared);
      }
    } finally {
      await observability?.close().catch(() => undefined);
      listening = false;
    }
  }

  return {
    run() {
      runPromise ??= runAttempts();
      return runPromise;
    },
    async stop() {
      stopRequested = true;
      attempt.stop();
      wake?.();
      await runPromise?.then(
        () => undefined,
        () => undefined,
      );
    },
    status() {
      return attempt.status();
    },
    observability: () => (listening ? observability?.address ?? null : null),
  };
}
