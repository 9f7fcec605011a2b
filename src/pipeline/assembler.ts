/**
 * The running pipeline: source → buffer → mapping → contracts → sink, with the checkpoint
 * coordinator deciding what the slot may forget. This file is the wiring and the lifecycle only;
 * each step is a file of its own:
 *
 * | step | file |
 * |---|---|
 * | stop and failure of a run; every wait ends on stop | run-control.ts |
 * | start-up: servers waited for, destination opened | startup.ts, destination-start.ts |
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
 */
import { parseConfig, type AssemblerConfig, type ResolvedConfig } from '../config/schema.js';
import { loadContractRegistry } from '../contracts/index.js';
import { createObservability, type Observability } from '../observability/observability.js';
import type { KurrentDBSink, Sink, SinkMode } from '../sink/index.js';
import { createPostgresSource, type PostgresSource } from '../source/index.js';
import { compareLsn } from '../source/position.js';
import type { Lsn } from '../source/types.js';
import { createAppender, type Appender } from './appender.js';
import { createCheckpointCoordinator } from './checkpoint-coordinator.js';
import { createCheckpointWriter, type CheckpointWriter } from './checkpoint-writer.js';
import { createContractCheck, type ContractCheck } from './contract-check.js';
import { openDestination } from './destination-start.js';
import { createLogger, type Logger } from './logger.js';
import { createRunControl, errorInfo, StopBeforeStart, type RunControl } from './run-control.js';
import { runTransactionLoop } from './run-loop.js';
import { createRunStats } from './run-stats.js';
import { startSnapshots } from './snapshot-start.js';
import { startIncremental, startNextRequest } from './snapshot-requests.js';
import { createSnapshotState, type SnapshotDeps } from './snapshot-state.js';
import { checkSlotAgainstCheckpoint, type LastCheckpoint } from './start-decision.js';
import { createStartupGuard } from './startup.js';
import { slotCheckRow, identifySystem } from './source-queries.js';
import { aggregateSinkStatus, assemblerStatus, runSummary } from './status.js';
import { createTransactionHandler } from './transaction-handler.js';
import { routeTransaction } from './transaction-router.js';
import type { Assembler, AssemblerDeps, AssemblerState, AssemblerStatus, RunSummary, TxPayload } from './types.js';

export type { Assembler, AssemblerDeps, AssemblerState, AssemblerStatus, RunSummary, SnapshotSummary } from './types.js';

const IDLE_CHECKPOINT_INTERVAL_MS = 2_000;

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

function buildSource(config: ResolvedConfig, log: Logger, checkpoints: CheckpointWriter | null): PostgresSource {
  return createPostgresSource({
    connection: config.source.connection,
    slot: config.source.slot,
    publication: config.source.publication,
    tables: config.source.tables,
    maxInFlightTransactions: config.limits.maxInFlightTransactions,
    maxInFlightBytes: config.limits.maxInFlightBytes,
    memoryLimitBytes: config.limits.memoryLimitBytes,
    ...(config.source.statusIntervalMs !== undefined ? { statusIntervalMs: config.source.statusIntervalMs } : {}),
    ...(config.source.spillDir !== undefined ? { spillDir: config.source.spillDir } : {}),
    ...(checkpoints ? { idleAcknowledgeLimit: () => checkpoints.recordedLsn } : {}),
    onReconnect: (error, delayMs, attempt) => log.warn('source: connection lost, reconnecting', { error: errorInfo(error), delayMs, attempt }),
  });
}

function logStarted(config: ResolvedConfig, log: Logger, started: { mode: SinkMode | null; snapshotAction: string | null; last: LastCheckpoint | null; slotConfirmed: Lsn | null; checked: boolean }): void {
  const { mode } = started;
  log.info('assembler started', {
    name: config.name,
    mode,
    modeMeaning: mode === 'multi-stream' ? 'each source transaction lands atomically across its streams' : mode === 'per-stream' ? 'per-stream appends; events carry transaction.index/count' : 'custom sink',
    concurrentAppends: config.limits.maxConcurrentAppends,
    maxBatchTransactions: config.limits.maxBatchTransactions,
    slot: config.source.slot,
    publication: config.source.publication,
    tables: config.source.tables.map((t) => t.table),
    snapshot: config.snapshot.mode,
    ...(started.snapshotAction ? { snapshotAction: started.snapshotAction } : {}),
    contractViolation: config.failurePolicy.contractViolation,
    lastCheckpoint: started.last?.endLsn ?? null,
    slotConfirmedFlushLsn: started.slotConfirmed,
    checks: started.checked ? 'passed' : 'skipped',
  });
}

/**
 * After a stop: appends in flight may become durable for `drainTimeoutMs`, and the durable
 * prefix is recorded and acknowledged. Past the deadline what is left is abandoned — not
 * acknowledged, so the slot sends it again on the next start (nothing is lost; the receipts
 * recognise what did land).
 */
async function drain(appender: Appender | null, checkpoints: CheckpointWriter, control: RunControl, log: Logger, timeoutMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<'deadline'>((resolve) => (timer = setTimeout(() => resolve('deadline'), timeoutMs)));
  const drained = (async () => {
    await appender?.drain();
    await checkpoints.flush();
    return 'drained' as const;
  })();
  const outcome = await Promise.race([drained, deadline]);
  clearTimeout(timer);
  if (outcome === 'deadline') {
    log.warn('stop: in-flight appends did not become durable within lifecycle.drainTimeoutMs; they are not acknowledged (the slot sends them again on the next start)', {
      drainTimeoutMs: timeoutMs,
      inFlightTransactions: appender?.inFlight ?? 0,
      acknowledgedLsn: checkpoints.acknowledgedLsn,
    });
    control.abandon();
  }
}

/** Builds the pipeline from a configuration (validated here: throws `ConfigError` naming the field). */
export function createAssembler(input: AssemblerConfig | ResolvedConfig, deps: AssemblerDeps = {}): Assembler {
  const config = isResolved(input) ? input : parseConfig(input);
  const log = redactingLogger(deps.logger ?? createLogger(), config.redactor);
  const control = createRunControl(log, config.redactor);
  const stats = createRunStats();
  const coordinator = createCheckpointCoordinator<TxPayload>();
  const snapshots = createSnapshotState();
  const startedAt = Date.now();

  let state: AssemblerState = 'new';
  let source: PostgresSource | null = null;
  let appender: Appender | null = null;
  let appendSink: Sink | null = null;
  let checkpointSink: KurrentDBSink | null = null;
  let mode: SinkMode | null = null;
  let checkContract: ContractCheck | null = null;
  let runPromise: Promise<RunSummary> | null = null;
  let stopReason: RunSummary['reason'] | null = null;

  const observability: Observability | null = config.observability
    ? createObservability({
        name: config.name, slot: config.source.slot, connection: config.source.connection, mappers: config.mappers.map((m) => m.name),
        ...config.observability, log, status: () => status(),
      })
    : null;
  let listening = false;

  const checkpoints = createCheckpointWriter({ assembler: config.name, slot: config.source.slot, control, sink: () => checkpointSink, source: () => source, pending: () => coordinator.pending });
  const handler = createTransactionHandler({
    assembler: config.name, mappers: config.mappers, maxInFlightTransactions: config.limits.maxInFlightTransactions,
    control, stats, coordinator, checkpoints, log,
    appender: () => appender!, checkContract: () => checkContract!, mode: () => mode,
  });
  const snapshotDeps: SnapshotDeps = {
    config, log, control, state: snapshots, handler, checkpoints,
    snapshotDone() {
      stopReason = 'snapshot-done';
      control.requestStop();
    },
  };

  /** Everything before the first transaction: destination, checks, the start decision, the source. */
  async function start(): Promise<void> {
    checkContract = createContractCheck(await loadContractRegistry(config.contracts.dir), config);
    const guard = createStartupGuard(control, config.lifecycle.startupTimeoutMs);
    let opened;
    try {
      opened = await openDestination(config, { log, control, guard, snapshots, ...(deps.sink ? { sink: deps.sink } : {}) });
    } finally {
      guard.dispose();
    }
    ({ appendSink, checkpointSink, mode } = opened);
    appender = createAppender(appendSink, {
      maxConcurrentAppends: config.limits.maxConcurrentAppends, maxBatchUnits: config.limits.maxBatchTransactions, maxBatchEvents: config.limits.maxBatchEvents,
      ...(observability ? { onCallDone: observability.observeAppend } : {}),
    });
    const { last } = opened;
    let slotConfirmed: Lsn | null = null;
    if (checkpointSink) {
      slotConfirmed = checkSlotAgainstCheckpoint(await slotCheckRow(config.source.connection, config.source.slot), last, { slot: config.source.slot, mode: config.snapshot.mode, assembler: config.name });
      // What the slot already confirmed is durable by definition of the check above.
      let recorded = last?.endLsn ?? slotConfirmed;
      if (recorded && slotConfirmed && compareLsn(slotConfirmed, recorded) > 0) recorded = slotConfirmed;
      checkpoints.recordedLsn = recorded;
    }
    const resumeFrom = await startSnapshots(snapshotDeps, last?.endLsn ?? null, () => (state = 'running'));
    source = deps.source ?? buildSource(config, log, checkpointSink ? checkpoints : null);
    if (control.stopRequested) throw new StopBeforeStart();
    const report = await source.start();
    state = 'running';
    logStarted(config, log, { mode, snapshotAction: snapshots.info?.action ?? null, last, slotConfirmed, checked: Boolean(report) });
    if (resumeFrom) startIncremental(snapshotDeps, resumeFrom, true);
    else if (snapshots.requests.queued.length > 0) {
      // Requests queued behind a snapshot that finished just before the last stop.
      snapshots.systemId ??= (await identifySystem(config.source.connection)).systemId;
      startNextRequest(snapshotDeps);
    }
  }

  async function runOnce(): Promise<RunSummary> {
    state = 'starting';
    let idleTimer: ReturnType<typeof setInterval> | null = null;
    let reason: RunSummary['reason'] = 'stopped';
    try {
      if (observability) {
        await observability.start();
        listening = true;
      }
      await start();
      if (checkpointSink) {
        idleTimer = setInterval(() => void checkpoints.idle(), IDLE_CHECKPOINT_INTERVAL_MS);
        idleTimer.unref?.();
      }
      reason = await runTransactionLoop(source!, control, (tx) => routeTransaction(snapshotDeps, tx));
    } catch (error) {
      if (!(error instanceof StopBeforeStart)) control.fail(error);
    }
    state = control.fatal ? 'failed' : 'stopping';
    if (idleTimer) clearInterval(idleTimer);
    await drain(appender, checkpoints, control, log, config.lifecycle.drainTimeoutMs);
    await snapshots.incremental?.close().catch(() => undefined);
    await source?.close().catch(() => undefined);
    await Promise.allSettled([appendSink?.close(), checkpointSink?.close(), snapshots.store?.close(), observability?.close()]);
    listening = false;
    const result = runSummary(stopReason ?? reason, { stats, acknowledgedLsn: checkpoints.acknowledgedLsn, mode, startedAt, snapshots });
    if (control.fatal) {
      state = 'failed';
      log.error('assembler stopped after a fatal error', { ...result, error: errorInfo(control.fatal) });
      throw control.fatal;
    }
    state = 'stopped';
    log.info('assembler stopped', { ...result, sink: aggregateSinkStatus([appendSink, checkpointSink]), ...(control.abandoned ? { abandonedInFlight: true } : {}) });
    return result;
  }

  function status(): AssemblerStatus {
    return assemblerStatus({
      name: config.name, state, mode, concurrentAppends: config.limits.maxConcurrentAppends, appender, stats,
      inFlight: coordinator.pending, receivedLsn: coordinator.receivedLsn, durableLsn: coordinator.acknowledgeable?.endLsn ?? null,
      acknowledgedLsn: checkpoints.acknowledgedLsn, source: source?.status() ?? null, sinks: [appendSink, checkpointSink],
      fatal: control.fatal, snapshots,
      newestDurableCommitTime: coordinator.acknowledgeable?.payload.commitTime ?? null,
      oldestPendingCommitTime: coordinator.firstPending?.payload.commitTime ?? null,
      recordedLsn: checkpoints.recordedLsn, recordedAt: checkpoints.recordedAt,
    });
  }

  return {
    run() {
      runPromise ??= runOnce();
      return runPromise;
    },
    async stop() {
      control.requestStop();
      if (!runPromise) {
        state = 'stopped';
        return;
      }
      await runPromise.then(
        () => undefined,
        () => undefined,
      );
    },
    status,
    observability: () => (listening ? observability?.address ?? null : null),
  };
}
