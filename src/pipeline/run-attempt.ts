/**
 * One run attempt: from start-up (waiting as a standby while another process streams the slot)
 * to the orderly close — everything whose state must be fresh when this process takes the slot:
 * the sinks (their stream revisions), the checkpoint writer and coordinator, the snapshot state,
 * the source. assembler.ts runs attempt after attempt: a leader that lost its connection and
 * finds the slot taken by another process ends its attempt without draining (its in-flight
 * appends are given up; the new leader re-sends them from the slot) and starts over as a standby.
 */
import type { ResolvedConfig } from '../config/schema.js';
import { ConfigError } from '../config/config-error.js';
import { ContractError, loadContractRegistry, type ContractRegistry } from '../contracts/index.js';
import type { KurrentDBSink, Sink, SinkMode } from '../sink/index.js';
import { createPostgresSource, type PostgresSource, type SlotHolder } from '../source/index.js';
import { compareLsn } from '../source/position.js';
import type { Lsn } from '../source/types.js';
import { createAppender, type Appender } from './appender.js';
import { startsOverAfter } from './attempt-retry.js';
import { createCheckpointCoordinator } from './checkpoint-coordinator.js';
import { createCheckpointWriter, type CheckpointWriter } from './checkpoint-writer.js';
import { createContractCheck, type ContractCheck } from './contract-check.js';
import { openDestination } from './destination-start.js';
import type { Logger } from './logger.js';
import { createRunControl, errorInfo, StopBeforeStart, type RunControl } from './run-control.js';
import { nameSchemaChangeMappers } from './schema-halt.js';
import { runTransactionLoop } from './run-loop.js';
import type { RunStats } from './run-stats.js';
import { closeFirstChanges, prepareFirstChanges } from './snapshot-first-change.js';
import { startSnapshots } from './snapshot-start.js';
import { startIncremental, startNextRequest } from './snapshot-requests.js';
import { createSnapshotState, type SnapshotDeps } from './snapshot-state.js';
import { awaitFreeSlot, type LeaderLock, type StandbyTracker } from './standby.js';
import { checkSlotAgainstCheckpoint, readLastCheckpoint, resumePoint, type LastCheckpoint } from './start-decision.js';
import { createStartupGuard } from './startup.js';
import { failoverState, slotCheckRow, identifySystem } from './source-queries.js';
import { parseSourceHosts } from '../source/multi-host.js';
import { aggregateSinkStatus, assemblerStatus, runSummary } from './status.js';
import { createTransactionHandler } from './transaction-handler.js';
import { routeTransaction } from './transaction-router.js';
import type { AssemblerDeps, AssemblerState, AssemblerStatus, RunSummary, TxPayload } from './types.js';

const IDLE_CHECKPOINT_INTERVAL_MS = 2_000;

export interface RunAttemptInput {
  readonly config: ResolvedConfig;
  readonly deps: AssemblerDeps;
  readonly log: Logger;
  /** Counters of the whole process (every attempt). */
  readonly stats: RunStats;
  readonly startedAt: number;
  readonly standby: StandbyTracker;
  /** The observability listener's append-latency histogram (seconds per append call). */
  readonly observeAppend?: (seconds: number) => void;
}

export interface AttemptResult {
  readonly summary: RunSummary;
  /** Another process took the slot from this one (not stopped): the caller starts over as a standby. */
  readonly lostSlot: SlotHolder | null;
}

export interface RunAttempt {
  /** Resolves when the attempt ended (a stop, the source's end, or the slot lost); rejects with a fatal error. */
  run(): Promise<AttemptResult>;
  /** Requests a stop; a stop before `run()` ends the attempt at once. */
  stop(): void;
  status(): AssemblerStatus;
}

/**
 * The contracts every event is checked against. A file that does not load (not JSON, not a
 * contract, a duplicate) is bad configuration, like a missing directory: `run` exits 2, naming
 * the field and the file, before anything connects.
 */
async function loadContracts(dir: string): Promise<ContractRegistry> {
  try {
    return await loadContractRegistry(dir);
  } catch (error) {
    if (!(error instanceof ContractError)) throw error;
    throw new ConfigError('contracts.dir', error.message, `repair or remove that file (\`event-assembler contracts check --dir ${dir} --no-against\` lists every problem)`);
  }
}

function buildSource(config: ResolvedConfig, log: Logger, checkpoints: CheckpointWriter | null, standby: StandbyTracker, loseSlot: (holder: SlotHolder) => void, startLsn: Lsn | null): PostgresSource {
  return createPostgresSource({
    connection: config.source.connection,
    slot: config.source.slot,
    publication: config.source.publication,
    tables: config.source.tables,
    maxInFlightTransactions: config.limits.maxInFlightTransactions,
    maxInFlightBytes: config.limits.maxInFlightBytes,
    memoryLimitBytes: config.limits.memoryLimitBytes,
    slotPollIntervalMs: config.standby.pollIntervalMs,
    ...(config.source.statusIntervalMs !== undefined ? { statusIntervalMs: config.source.statusIntervalMs } : {}),
    ...(config.source.spillDir !== undefined ? { spillDir: config.source.spillDir } : {}),
    ...(startLsn ? { startLsn } : {}),
    ...(checkpoints ? { idleAcknowledgeLimit: () => checkpoints.recordedLsn } : {}),
    onReconnect: (error, delayMs, attempt) => log.warn('source: connection lost, reconnecting', { error: errorInfo(error), delayMs, attempt }),
    onSession(session, previous) {
      if (!previous || (previous.server === session.server && previous.timeline === session.timeline)) return;
      log.warn('source: failover — capture continues on another server or timeline, from the durable position (the slot re-sends what was not acknowledged; receipts skip what already landed)', {
        server: session.server, timeline: session.timeline, previousServer: previous.server, previousTimeline: previous.timeline,
        startLsn: session.startLsn, slotConfirmedFlushLsn: session.confirmedFlushLsn,
      });
      logFailoverState(config, log);
    },
    onSlotActive: (holder) => (holder.ours ? standby.ownConnectionHolds(holder) : loseSlot(holder)),
    onUncapturedTable: (table) =>
      log.warn('source: changes of a table that is not captured arrive — it joined the publication (or a captured table was renamed); no mapper sees them, and the next start refuses (SOURCE_PUBLICATION_MISMATCH)', {
        table, publication: config.source.publication, fix: `capture it (a mapper that declares it, or source.tables), or ALTER PUBLICATION … DROP TABLE ${table}`,
      }),
  });
}

function logStarted(config: ResolvedConfig, log: Logger, started: { mode: SinkMode | null; snapshotAction: string | null; last: LastCheckpoint | null; slotConfirmed: Lsn | null; startLsn: Lsn | null; checked: boolean }): void {
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
    ...(started.startLsn ? { startLsn: started.startLsn } : {}),
    checks: started.checked ? 'passed' : 'skipped',
  });
}

/** Says whether the slot survives a failover of the primary (docs/failover.md); a warning when several hosts are configured and it does not. */
function logFailoverState(config: ResolvedConfig, log: Logger): void {
  failoverState(config.source.connection, config.source.slot).then(
    (state) => {
      const several = parseSourceHosts(config.source.connection).hosts.length > 1;
      const fields = { slot: config.source.slot, failoverSafe: state.safe, failover: state.failover, synchronizedStandbySlots: state.synchronizedStandbySlots, standbys: state.standbys };
      if (state.safe || !several) log.info(`source: ${state.summary}`, fields);
      else log.warn(`source: ${state.summary} — a failover to that standby would end capture with REBUILD_NEEDED (docs/failover.md)`, fields);
    },
    (error: unknown) => log.warn('source: could not read the slot\'s failover state', { error: errorInfo(error) }),
  );
}

/**
 * The slot against the checkpoint stream (start-decision.ts): the slot's confirmed position, and
 * the recorded position to stream from when the slot lags it (`null`: from the slot's).
 */
async function checkSlot(config: ResolvedConfig, last: LastCheckpoint | null): Promise<{ slotConfirmed: Lsn | null; resumeAt: Lsn | null }> {
  const row = await slotCheckRow(config.source.connection, config.source.slot);
  const slotConfirmed = checkSlotAgainstCheckpoint(row, last, { slot: config.source.slot, mode: config.snapshot.mode, assembler: config.name });
  if (!slotConfirmed || !last || compareLsn(last.endLsn, slotConfirmed) <= 0) return { slotConfirmed, resumeAt: null };
  // pg_control_system() may not be granted to the capture role; IDENTIFY_SYSTEM is.
  const systemId = row?.system_identifier || (await identifySystem(config.source.connection)).systemId;
  return { slotConfirmed, resumeAt: resumePoint(row, last, config.source.slot, systemId) };
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

export function createRunAttempt(input: RunAttemptInput): RunAttempt {
  const { config, deps, log, stats, standby } = input;
  const control = createRunControl(log, config.redactor, (error) => startsOverAfter(error, deps));
  const coordinator = createCheckpointCoordinator<TxPayload>();
  const snapshots = createSnapshotState();

  let state: AssemblerState = 'new';
  let source: PostgresSource | null = null;
  let appender: Appender | null = null;
  let appendSink: Sink | null = null;
  let checkpointSink: KurrentDBSink | null = null;
  let mode: SinkMode | null = null;
  let checkContract: ContractCheck | null = null;
  let running = false;
  let stopReason: RunSummary['reason'] | null = null;
  let stopped = false;
  let lostSlot: SlotHolder | null = null;
  let leaderLock: LeaderLock | null = null;

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

  /** Another process streams the slot now: this attempt's state is stale — give up what is in flight, start over as a standby. */
  function loseSlot(holder: SlotHolder): void {
    if (lostSlot || control.fatal || control.stopRequested) return;
    lostSlot = holder;
    control.abandon();
  }

  /** The slot is the lock: wait while another process streams it. After a wait, what the leader made durable meanwhile is read again. */
  async function waitForSlot(last: LastCheckpoint | null): Promise<LastCheckpoint | null> {
    const { stoodBy, lock } = await awaitFreeSlot({ connection: config.source.connection, slot: config.source.slot, pollIntervalMs: config.standby.pollIntervalMs, control, log, tracker: standby });
    leaderLock = lock;
    if (!stoodBy) return last;
    if (snapshots.store) {
      snapshots.stored = snapshots.store.load();
      snapshots.stored.catch(() => undefined); // reported when the start decision awaits it
    }
    return checkpointSink ? readLastCheckpoint(config.destination.connectionString, config.name, control) : last;
  }

  /** Everything before the first transaction: destination, standby, checks, the start decision, the source. */
  async function start(): Promise<void> {
    checkContract = createContractCheck(await loadContracts(config.contracts.dir), config);
    const guard = createStartupGuard(control, config.lifecycle.startupTimeoutMs);
    let opened;
    try {
      opened = await openDestination(config, { log, control, guard, snapshots, ...(deps.sink ? { sink: deps.sink } : {}) });
    } finally {
      guard.dispose(); // waiting for the slot below is no unavailability: the deadline does not apply
    }
    ({ appendSink, checkpointSink, mode } = opened);
    appender = createAppender(appendSink, {
      maxConcurrentAppends: config.limits.maxConcurrentAppends, minConcurrentUnits: config.limits.minConcurrentBatch, maxBatchUnits: config.limits.maxBatchTransactions, maxBatchEvents: config.limits.maxBatchEvents,
      ...(input.observeAppend ? { onCallDone: input.observeAppend } : {}),
    });
    const last = await waitForSlot(opened.last);
    let slotConfirmed: Lsn | null = null;
    let resumeAt: Lsn | null = null;
    if (checkpointSink) {
      ({ slotConfirmed, resumeAt } = await checkSlot(config, last));
      // What the slot already confirmed is durable by definition of the check above.
      let recorded = last?.endLsn ?? slotConfirmed;
      if (recorded && slotConfirmed && compareLsn(slotConfirmed, recorded) > 0) recorded = slotConfirmed;
      checkpoints.recordedLsn = recorded;
    }
    const resumeFrom = await startSnapshots(snapshotDeps, last?.endLsn ?? null, () => (state = 'running'));
    // A snapshot phase made a new slot: it streams from its own consistent point.
    const startLsn = snapshots.info?.action === 'new-generation' || snapshots.info?.action === 'initial-snapshot' ? null : resumeAt;
    source = deps.source ?? buildSource(config, log, checkpointSink ? checkpoints : null, standby, loseSlot, startLsn);
    if (control.stopRequested) throw new StopBeforeStart();
    const report = await source.start();
    // Nothing below (incremental snapshots, checkpoints) runs before this process holds the slot.
    if ((await control.until(source.streaming())) === 'stop' || control.stopRequested) throw new StopBeforeStart();
    standby.leading();
    state = 'running';
    logStarted(config, log, { mode, snapshotAction: snapshots.info?.action ?? null, last, slotConfirmed, startLsn, checked: Boolean(report) });
    logFailoverState(config, log);
    if (resumeFrom) {
      // Ready before the first transaction is routed: the first-change rule must see every one.
      snapshots.begin = await prepareFirstChanges(snapshotDeps, resumeFrom);
      startIncremental(snapshotDeps, resumeFrom, true);
    }
    else if (snapshots.requests.queued.length > 0) {
      // Requests queued behind a snapshot that finished just before the last stop.
      snapshots.systemId ??= (await identifySystem(config.source.connection)).systemId;
      startNextRequest(snapshotDeps);
    }
  }

  async function runOnce(): Promise<AttemptResult> {
    state = 'starting';
    let idleTimer: ReturnType<typeof setInterval> | null = null;
    let reason: RunSummary['reason'] = 'stopped';
    try {
      await start();
      if (checkpointSink) {
        idleTimer = setInterval(() => void checkpoints.idle(), IDLE_CHECKPOINT_INTERVAL_MS);
        idleTimer.unref?.();
      }
      reason = await runTransactionLoop(source!, control, (tx) => routeTransaction(snapshotDeps, tx));
    } catch (error) {
      if (!(error instanceof StopBeforeStart)) control.fail(nameSchemaChangeMappers(error, config.mappers));
    }
    state = control.fatal ? 'failed' : 'stopping';
    if (idleTimer) clearInterval(idleTimer);
    // The slot lost: no drain — appends of this stale state would race the new leader's; it re-sends them.
    if (!lostSlot) await drain(appender, checkpoints, control, log, config.lifecycle.drainTimeoutMs);
    await snapshots.landing;
    await snapshots.incremental?.close().catch(() => undefined);
    await closeFirstChanges(snapshots.begin);
    snapshots.begin = null;
    await source?.close().catch(() => undefined);
    await Promise.allSettled([appendSink?.close(), checkpointSink?.close(), snapshots.store?.close()]);
    await leaderLock?.release();
    const summary = runSummary(stopReason ?? reason, { stats, acknowledgedLsn: checkpoints.acknowledgedLsn, mode, startedAt: input.startedAt, snapshots });
    if (control.fatal) {
      state = 'failed';
      if (startsOverAfter(control.fatal, deps)) {
        log.warn('run attempt ended: PostgreSQL connection lost (a new attempt follows)', { ...summary, error: errorInfo(control.fatal) });
      } else {
        log.error('assembler stopped after a fatal error', { ...summary, error: errorInfo(control.fatal) });
      }
      throw control.fatal;
    }
    state = 'stopped';
    if (lostSlot && !stopped) {
      // A leader replaced while it reconnected — or a standby that lost the race for a freed slot
      // (nothing in flight then): both stand by, the standing-by line names the new holder.
      if (standby.role === 'leader') {
        log.warn('lost the slot to another process: in-flight work given up (the new leader re-sends it from the slot)', {
          slot: config.source.slot, holder: { pid: lostSlot.pid, client: lostSlot.client, applicationName: lostSlot.applicationName }, acknowledgedLsn: checkpoints.acknowledgedLsn,
        });
      }
      standby.standingBy(lostSlot);
      return { summary, lostSlot };
    }
    log.info('assembler stopped', { ...summary, sink: aggregateSinkStatus([appendSink, checkpointSink]), ...(control.abandoned && !lostSlot ? { abandonedInFlight: true } : {}) });
    return { summary, lostSlot: null };
  }

  return {
    run() {
      running = true;
      return runOnce();
    },
    stop() {
      stopped = true;
      control.requestStop();
      if (!running) state = 'stopped';
    },
    status() {
      return assemblerStatus({
        name: config.name, state, role: standby.role, slotHolder: standby.holder, mode, concurrentAppends: config.limits.maxConcurrentAppends, appender, stats,
        inFlight: coordinator.pending, receivedLsn: coordinator.receivedLsn, durableLsn: coordinator.acknowledgeable?.endLsn ?? null,
        acknowledgedLsn: checkpoints.acknowledgedLsn, source: source?.status() ?? null, sinks: [appendSink, checkpointSink],
        fatal: control.fatal, snapshots,
        newestDurableCommitTime: coordinator.acknowledgeable?.payload.commitTime ?? null,
        oldestPendingCommitTime: coordinator.firstPending?.payload.commitTime ?? null,
        recordedLsn: checkpoints.recordedLsn, recordedAt: checkpoints.recordedAt,
      });
    },
  };
}
