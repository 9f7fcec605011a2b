/**
 * The running pipeline: source → buffer → mapping → contracts → sink, with the checkpoint
 * coordinator deciding what the slot may forget. The wiring lives here and only here.
 *
 * Per transaction: materialise the changes (spill files released right after), map, validate
 * every event against its contract, then queue the unit on the append lanes. Mapping runs one
 * transaction at a time, in commit order; appends of different streams overlap (lanes.ts).
 * When the contiguous prefix of durable transactions advances, a checkpoint record is appended
 * to `event-assembler.checkpoint-<name>` and only then is the slot acknowledged — so the slot's
 * confirmed_flush_lsn is never ahead of the destination's record, which is what the start-up
 * check relies on to detect that someone else advanced the slot (DESIGN invariant 7).
 */
import { BACKWARDS, END, KurrentDBClient } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { readChanges, readChangesNow, withChanges, type CommittedTransaction } from '../buffer/index.js';
import { parseConfig, type AssemblerConfig, type ResolvedConfig } from '../config/schema.js';
import { loadContractRegistry } from '../contracts/index.js';
import { EventAssemblerError } from '../errors.js';
import { canonicalKey, mapUnit, uuidv5, EVENT_ASSEMBLER_NAMESPACE, type EventToAppend, type FailedRecord, type MapResult } from '../mapping/index.js';
import { CHECKPOINT_EVENT_TYPE, checkpointStreamName, createKurrentDBSink, SLICED_UNIT_EVENTS, type AppendOutcome, type KurrentDBSink, type Sink, type SinkEvent, type SinkMode, type SinkPosition, type SinkStatus, readerConnectionString } from '../sink/index.js';
import { createPostgresSource, type PostgresSource, type SourceStatus } from '../source/index.js';
import { compareLsn, lsnDistance, makeSourcePosition } from '../source/position.js';
import {
  adHocSnapshotProgress, createIncrementalSnapshot, createSlotWithSnapshot, decideSnapshot, decodeSnapshotRequest, describeTable, isSnapshotFinished, newSnapshotProgress, nextGeneration,
  readInitialSnapshot, requireKey, SNAPSHOT_REQUEST_PREFIX, unservableReason, updateTable,
  type IncrementalSnapshot, type SnapshotDecision, type SnapshotProgress, type SnapshotRequest,
} from '../source/snapshot/index.js';
import type { Change, ChangeSequence, Lsn, MessageChange, SnapshotRecord, SourceTransaction, SourceUnit } from '../source/types.js';
import { createCheckpointCoordinator } from './checkpoint-coordinator.js';
import { createContractCheck, type ContractCheck } from './contract-check.js';
import { RebuildNeededError } from './errors.js';
import { createAppender, type Appender } from './appender.js';
import { createLogger, type Logger } from './logger.js';
import { createLargeUnits, type Queued } from './large-units.js';
import { isLargeTransaction } from './slices.js';
import { createKurrentDBSnapshotStore, HANDLED_REQUESTS_KEPT, snapshotProgressStreamName, type PinnedPosition, type PipelineSnapshotStore, type SnapshotRequestState } from './snapshot-store.js';

export interface AssemblerDeps {
  /** Default: JSON lines on stderr. Every line passes the configuration's redactor. */
  readonly logger?: Logger;
  /**
   * Replaces the KurrentDB sinks (e.g. a null sink for benchmarks). Used as the only lane; the
   * pipeline then writes no checkpoint records and skips the checkpoint-vs-slot start-up check.
   */
  readonly sink?: Sink;
  /** Replaces the PostgreSQL source built from `config.source`. */
  readonly source?: PostgresSource;
}

export type AssemblerState = 'new' | 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';

export interface SnapshotSummary {
  /**
   * What the start-up decision was (`initial-snapshot`, `resume-snapshot`, `new-generation`,
   * `stream`, `stop`, …), or `ad-hoc-snapshot` once an ad hoc snapshot requested with
   * `event-assembler snapshot` started (then `generation` is its generation).
   */
  readonly action: SnapshotDecision['action'] | 'ad-hoc-snapshot';
  readonly code: string;
  readonly reason: string;
  readonly generation: string | null;
  /** Snapshot rows read by this run (initial and resumed part). */
  readonly rows: number;
  /** Events appended (or found already applied) from snapshot records by this run. */
  readonly events: number;
  /** The generation is complete (every table done). */
  readonly finished: boolean;
  /** Where streaming starts/started: the slot's consistent point (initial snapshot). */
  readonly consistentPoint: Lsn | null;
}

export interface RunSummary {
  /** `snapshot-done`: mode `initial_only` finished its snapshot (or found it finished) and stopped. */
  readonly reason: 'stopped' | 'source-ended' | 'snapshot-done';
  readonly transactions: { readonly received: number; readonly appended: number; readonly skipped: number; readonly parked: number };
  readonly events: { readonly appended: number; readonly replaySkipped: number; readonly byType: Readonly<Record<string, number>> };
  readonly parked: { readonly mapperFailures: number; readonly contractViolations: number };
  /** Last position acknowledged to the slot (`null` when none). */
  readonly acknowledgedLsn: Lsn | null;
  readonly mode: SinkMode | null;
  readonly durationMs: number;
  /** `null` with snapshot mode `never`. */
  readonly snapshot: SnapshotSummary | null;
}

export interface AssemblerStatus {
  readonly name: string;
  readonly state: AssemblerState;
  /** Sink mode once started: `multi-stream` (atomic per transaction) or `per-stream`. */
  readonly mode: SinkMode | null;
  /** Append calls that may run at once (on disjoint streams). */
  readonly concurrentAppends: number;
  /** Group commit so far: append calls, and transactions/snapshot records per call. */
  readonly batching: { readonly calls: number; readonly unitsPerCall: number | null; readonly largestBatch: number };
  readonly transactions: {
    readonly received: number;
    /** Had events (or failed records) and they are durable. */
    readonly appended: number;
    /** No mapper produced anything; still advance the acknowledged position. */
    readonly skipped: number;
    /** Received and not yet durable. */
    readonly inFlight: number;
    /**
     * Units of more than SLICED_UNIT_EVENTS events (bulk transactions) queued in slices: each
     * slice lands atomically, the unit not (consumers: `transaction.index` / `transaction.count`).
     */
    readonly sliced: number;
  };
  readonly events: {
    /** Events written by this run. */
    readonly appended: number;
    /** Events found already applied (replays). */
    readonly replaySkipped: number;
    /** Durable events (written or found applied) by type. */
    readonly byType: Readonly<Record<string, number>>;
  };
  readonly parked: { readonly mapperFailures: number; readonly contractViolations: number };
  readonly lag: {
    /** Highest WAL position received from PostgreSQL. */
    readonly receivedLsn: Lsn | null;
    /** End of the contiguous durable prefix. */
    readonly durableLsn: Lsn | null;
    /** What the slot was told (after the checkpoint record landed). */
    readonly acknowledgedLsn: Lsn | null;
    /** WAL bytes between received and acknowledged. */
    readonly bytes: number | null;
    /** Commit time → durable in KurrentDB, last transaction (ms). */
    readonly commitToAppendMs: number | null;
    /** Same, averaged over this run (ms). */
    readonly commitToAppendAvgMs: number | null;
    /**
     * Percentiles of commit time → durable in KurrentDB over the last 10,000 appended
     * transactions, measured here when the append resolves (`null` before the first).
     */
    readonly commitToAppendPercentiles: { readonly samples: number; readonly p50Ms: number; readonly p99Ms: number; readonly maxMs: number } | null;
  };
  readonly source: SourceStatus | null;
  readonly sink: SinkStatus | null;
  readonly lastError: { readonly code: string | null; readonly message: string } | null;
  /** `null` with snapshot mode `never`. */
  readonly snapshot: (SnapshotSummary & { readonly progress: SnapshotProgress | null }) | null;
}

export interface Assembler {
  /** Runs until `stop()` (resolves with a summary) or a fatal error (rejects with it). */
  run(): Promise<RunSummary>;
  /** Graceful: stop reading, drain in-flight appends, acknowledge what is durable, close. */
  stop(): Promise<void>;
  status(): AssemblerStatus;
}

interface TxPayload {
  readonly tx: SourceTransaction | null;
  readonly commitLsn: Lsn;
  readonly xid: number;
  readonly checkpoint: string;
  readonly systemId: string;
}

const IDLE_CHECKPOINT_INTERVAL_MS = 2_000;

/** `stop()` arrived during start-up: skip to the orderly close. */
class StopBeforeStart extends Error {}

function isResolved(config: AssemblerConfig | ResolvedConfig): config is ResolvedConfig {
  return typeof (config as ResolvedConfig).redactor === 'object' && Array.isArray((config as ResolvedConfig).source?.tables) && typeof (config as ResolvedConfig).source.connection === 'string';
}

function errorInfo(error: unknown): { code: string | null; message: string } {
  return { code: error instanceof EventAssemblerError ? error.code : typeof (error as { code?: unknown })?.code === 'string' ? ((error as { code: string }).code) : null, message: error instanceof Error ? error.message : String(error) };
}

/** Builds the pipeline from a configuration (validated here: throws `ConfigError` naming the field). */
export function createAssembler(input: AssemblerConfig | ResolvedConfig, deps: AssemblerDeps = {}): Assembler {
  const config = isResolved(input) ? input : parseConfig(input);
  const { redactor } = config;
  const base = deps.logger ?? createLogger();
  const log: Logger = {
    info: (m, f) => base.info(redactor.text(m), redactor.fields(f)),
    warn: (m, f) => base.warn(redactor.text(m), redactor.fields(f)),
    error: (m, f) => base.error(redactor.text(m), redactor.fields(f)),
  };

  let state: AssemblerState = 'new';
  let source: PostgresSource | null = null;
  let appender: Appender | null = null;
  let appendSink: Sink | null = null;
  let checkpointSink: KurrentDBSink | null = null;
  let mode: SinkMode | null = null;
  let fatal: unknown = null;
  let stopRequested = false;
  /**
   * Waits racing a stop request. Not `Promise.race([p, stopSignal])` per transaction: every race
   * leaves a reaction on the never-settling stop promise, one per transaction for the life of
   * the run — garbage the collector must keep copying (it showed as the pipeline's extra GC).
   */
  const stopWaiters = new Set<(value: 'stop') => void>();
  let stopped = false;
  const wakeStop = (): void => {
    stopped = true;
    for (const wake of [...stopWaiters]) wake('stop');
    stopWaiters.clear();
  };
  function untilStop<T>(promise: Promise<T>): Promise<T | 'stop'> {
    if (stopped) return Promise.resolve('stop');
    return new Promise<T | 'stop'>((resolve, reject) => {
      stopWaiters.add(resolve);
      promise.then(
        (value) => {
          stopWaiters.delete(resolve);
          resolve(value);
        },
        (error: unknown) => {
          stopWaiters.delete(resolve);
          reject(error);
        },
      );
    });
  }
  let runPromise: Promise<RunSummary> | null = null;
  let stopReason: RunSummary['reason'] | null = null;
  const startedAt = Date.now();

  const coordinator = createCheckpointCoordinator<TxPayload>();
  const counts = { received: 0, appended: 0, skipped: 0, parkedTx: 0, sliced: 0, eventsAppended: 0, replaySkipped: 0, mapperFailures: 0, contractViolations: 0 };
  const byType: Record<string, number> = {};
  let lagLast: number | null = null;
  let lagSum = 0;
  let lagN = 0;
  const lagWindow = createLagWindow(10_000);
  let acknowledgedLsn: Lsn | null = null;
  /** Highest position recorded in the checkpoint stream: the slot is never acknowledged beyond it. */
  let recordedLsn: Lsn | null = null;
  let checkpointTarget: TxPayload & { endLsn: Lsn } | null = null;
  let checkpointWriting: Promise<void> | null = null;

  function setFatal(error: unknown): void {
    if (fatal) return;
    fatal = redactor.error(error);
    log.error('assembler: fatal error, stopping', { error: errorInfo(error) });
    stopRequested = true;
    wakeStop();
  }

  // ---- checkpoints -------------------------------------------------------------------------

  function checkpointEvent(target: TxPayload & { endLsn: Lsn }, idle: boolean): { position: SinkPosition; events: SinkEvent[] } {
    const stream = checkpointStreamName(config.name);
    const position = { kind: 'transaction' as const, checkpoint: target.checkpoint, commitLsn: target.commitLsn, xid: target.xid, systemId: target.systemId };
    return {
      position,
      events: [
        {
          id: uuidv5(JSON.stringify(['pipeline-checkpoint', config.name, target.systemId, target.endLsn]), EVENT_ASSEMBLER_NAMESPACE),
          stream,
          type: CHECKPOINT_EVENT_TYPE,
          data: { assembler: config.name, position: { ...position, endLsn: target.endLsn, slot: config.source.slot, ...(idle ? { idle: true } : {}) } },
          metadata: { contract: `${CHECKPOINT_EVENT_TYPE}@1`, 'source.checkpoint': target.checkpoint, 'source.endLsn': target.endLsn },
        },
      ],
    };
  }

  function acknowledge(endLsn: Lsn): void {
    if (!source) return;
    source.acknowledge(endLsn);
    acknowledgedLsn = endLsn;
  }

  /** Writes the newest durable prefix to the checkpoint stream, then acknowledges it; one write at a time. */
  function pumpCheckpoint(): void {
    if (checkpointWriting || !checkpointTarget) return;
    const target = checkpointTarget;
    checkpointTarget = null;
    if (!checkpointSink || (recordedLsn !== null && compareLsn(target.endLsn, recordedLsn) <= 0)) {
      // Nothing to record (a custom sink, or a replay below what is recorded already).
      acknowledge(target.endLsn);
      return;
    }
    const writing: Promise<void> = checkpointSink
      .append(checkpointEvent(target, false))
      .then(
        () => {
          if (recordedLsn === null || compareLsn(target.endLsn, recordedLsn) > 0) recordedLsn = target.endLsn;
          acknowledge(target.endLsn);
        },
        (error: unknown) => setFatal(error),
      )
      .finally(() => {
        // Runs in a later microtask, so `checkpointWriting` is already this promise.
        if (checkpointWriting === writing) checkpointWriting = null;
        pumpCheckpoint();
      });
    checkpointWriting = writing;
  }

  async function flushCheckpoints(): Promise<void> {
    for (;;) {
      pumpCheckpoint();
      const writing = checkpointWriting;
      if (!writing) return;
      await writing;
    }
  }

  /** While nothing is in flight, record the received keepalive position so the source may acknowledge it. */
  async function idleCheckpoint(): Promise<void> {
    if (!source || !checkpointSink || checkpointWriting || coordinator.pending > 0 || stopRequested) return;
    const s = source.status();
    if (s.inFlightTransactions > 0 || s.openTransactions > 0 || !s.systemId || s.timeline === null) return;
    const received = s.receivedLsn;
    if (received === '0/0' || (recordedLsn !== null && compareLsn(received, recordedLsn) <= 0)) return;
    const position = makeSourcePosition({ systemId: s.systemId, timeline: s.timeline, slot: config.source.slot, commitLsn: received, xid: 0 });
    const writing: Promise<void> = checkpointSink
      .append(checkpointEvent({ tx: null, commitLsn: received, xid: 0, checkpoint: position.checkpoint, systemId: s.systemId, endLsn: received }, true))
      .then(
        () => {
          if (recordedLsn === null || compareLsn(received, recordedLsn) > 0) recordedLsn = received;
        },
        (error: unknown) => setFatal(error),
      )
      .finally(() => {
        if (checkpointWriting === writing) checkpointWriting = null;
        pumpCheckpoint();
      });
    checkpointWriting = writing;
    await writing;
  }

  async function readLastCheckpoint(): Promise<{ endLsn: Lsn; systemId: string | null; slot: string | null } | null> {
    const client = KurrentDBClient.connectionString(readerConnectionString(config.destination.connectionString));
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          for await (const resolved of client.readStream(checkpointStreamName(config.name), { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
            const data = resolved.event?.data as { position?: { endLsn?: unknown; systemId?: unknown; slot?: unknown } } | undefined;
            const endLsn = data?.position?.endLsn;
            if (typeof endLsn !== 'string') return null;
            return { endLsn, systemId: typeof data?.position?.systemId === 'string' ? data.position.systemId : null, slot: typeof data?.position?.slot === 'string' ? data.position.slot : null };
          }
          return null;
        } catch (error) {
          const type = (error as { type?: unknown }).type;
          if (type === 'stream-not-found') return null;
          if (attempt >= 5 || stopRequested) throw error;
          await new Promise((r) => setTimeout(r, 200 * attempt));
        }
      }
    } finally {
      await client.dispose().catch(() => undefined);
    }
  }

  async function checkSlotAgainstCheckpoint(last: { endLsn: Lsn; systemId: string | null; slot: string | null } | null): Promise<Lsn | null> {
    const client = new pg.Client({ connectionString: config.source.connection });
    await client.connect();
    try {
      const { rows } = await client.query<{ confirmed_flush_lsn: string | null; wal_status: string | null; system_identifier: string }>(
        `SELECT s.confirmed_flush_lsn::text AS confirmed_flush_lsn, s.wal_status, (SELECT system_identifier::text FROM pg_control_system()) AS system_identifier
           FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = $1`,
        [config.source.slot],
      ).catch(async () =>
        // pg_control_system() may not be granted: the comparison then assumes the same system.
        client.query<{ confirmed_flush_lsn: string | null; wal_status: string | null; system_identifier: string }>(
          `SELECT confirmed_flush_lsn::text AS confirmed_flush_lsn, wal_status, '' AS system_identifier FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`,
          [config.source.slot],
        ),
      );
      const slot = rows[0];
      if (!slot || !slot.confirmed_flush_lsn) return null; // the source's checks name a missing slot
      // Mode 'when_needed' answers an unservable slot with a new snapshot generation: the
      // snapshot decision (decideStart) sees the same slot state and says so, loudly.
      const deferToDecision = config.snapshot.mode === 'when_needed';
      if (slot.wal_status === 'lost') {
        if (deferToDecision) return null;
        throw new RebuildNeededError(`replication slot "${config.source.slot}" was invalidated (wal_status = 'lost'): the WAL it needed is gone`, { slot: config.source.slot });
      }
      if (last && (!last.systemId || !slot.system_identifier || last.systemId === slot.system_identifier)) {
        if (compareLsn(slot.confirmed_flush_lsn, last.endLsn) > 0) {
          if (deferToDecision) return null;
          throw new RebuildNeededError(
            `replication slot "${config.source.slot}" has confirmed_flush_lsn ${slot.confirmed_flush_lsn}, ahead of the last position this assembler recorded as durable ` +
              `(${last.endLsn} in ${checkpointStreamName(config.name)}${last.slot ? `, slot "${last.slot}"` : ''}): someone else advanced the slot, and the transactions in between were never appended`,
            { slot: config.source.slot, confirmedFlushLsn: slot.confirmed_flush_lsn, checkpointLsn: last.endLsn, checkpointStream: checkpointStreamName(config.name) },
          );
        }
      }
      return slot.confirmed_flush_lsn;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  // ---- units -------------------------------------------------------------------------------

  let checkContract: ContractCheck | null = null;

  function validateEvents(events: readonly EventToAppend[], unit: SourceUnit): { ok: EventToAppend[]; parked: FailedRecord[] } {
    const ok: EventToAppend[] = [];
    const parked: FailedRecord[] = [];
    for (const event of events) {
      const record = checkContract!(event, unit);
      if (record) parked.push(record);
      else ok.push(event);
    }
    return { ok, parked };
  }

  async function waitForCapacity(): Promise<void> {
    if (!appender || appender.inFlight < config.limits.maxInFlightTransactions) return;
    await untilStop(appender.whenBelow(config.limits.maxInFlightTransactions));
  }

  /**
   * The one place a source unit — a committed transaction, or a snapshot record with a snapshot
   * position — becomes appended events: map, validate, queue on the lanes. Gives the unit queued
   * with the promise of its durability (`null`: nothing to append) — at once when the appender
   * has room, else a promise of it once it has.
   */
  const NO_RECORDS: readonly FailedRecord[] = Object.freeze([]);

  function handleUnit(unit: SourceUnit, position: SinkPosition, sourceIdentity: string): Queued | null | Promise<Queued | null> {
    return queueMapped(unit, position, mapUnit(config.mappers, unit, { assembler: config.name, sourceIdentity }));
  }

  /** A unit's mapped events validated and queued: whole, or in slices when it has more than SLICED_UNIT_EVENTS. */
  function queueMapped(unit: SourceUnit, position: SinkPosition, mapped: MapResult): Queued | null | Promise<Queued | null> {
    const total = mapped.events.length + mapped.failed.length;
    if (total > SLICED_UNIT_EVENTS) return queueSliced(unit, position, total, mapped.failed, mapped.events);
    const { ok, parked } = validateEvents(mapped.events, unit);
    const failed = mapped.failed.length === 0 && parked.length === 0 ? NO_RECORDS : [...mapped.failed, ...parked];
    for (const record of failed) logParked(record);
    counts.mapperFailures += mapped.failed.length;
    counts.contractViolations += parked.length;
    const events: SinkEvent[] = failed.length === 0 ? ok : [...ok, ...failed];
    if (events.length === 0) return null;
    const queue = (): Queued => {
      if (stopRequested && fatal) throw fatal;
      const durable = appender!.append({ position, events });
      return {
        durable: durable.then((outcome) => {
          counts.eventsAppended += outcome?.appended ?? 0;
          counts.replaySkipped += outcome?.skipped ?? 0;
          for (const e of ok) byType[e.type] = (byType[e.type] ?? 0) + 1;
          if (failed.length > 0) counts.parkedTx += 1;
          return outcome;
        }),
      };
    };
    if (appender && appender.inFlight >= config.limits.maxInFlightTransactions) return waitForCapacity().then(queue);
    return queue();
  }

  function logParked(record: SinkEvent): void {
    log.warn('record parked', {
      type: record.type,
      stream: record.stream,
      id: record.id,
      mapper: record.metadata['mapper'] ?? null,
      commitLsn: record.metadata['source.commitLsn'] ?? null,
      xid: record.metadata['source.xid'] ?? null,
      ...(record.type === 'ContractViolation' ? { contract: record.metadata['contract'] ?? null } : {}),
    });
  }

  const { queueSliced, mapLarge } = createLargeUnits({
    mappers: config.mappers,
    assembler: config.name,
    log,
    counts,
    byType,
    appender: () => appender!,
    checkContract: () => checkContract!,
    mode: () => mode,
    stopping: () => stopRequested,
    fatal: () => fatal,
    logParked,
    queueWhole: queueMapped,
  });

  /**
   * One committed transaction: its changes mapped and queued for appending, and its end LSN
   * registered with the checkpoint coordinator. Synchronous when its changes are in memory and
   * the appender has room (the common case: no promise per transaction); else a promise.
   */
  function handleTransaction(tx: CommittedTransaction, materialized?: Change[]): Promise<void> | undefined {
    const changes = materialized ?? readChangesNow(tx);
    if (changes === null) return readChanges(tx).then((read) => handleTransaction(tx, read));
    return registerAndQueue(tx, withChanges(tx, changes), handleUnit);
  }

  /** A large transaction (slices.ts `isLargeTransaction`): mapped from its change sequence, which must stay readable until this resolves. */
  async function handleLargeTransaction(tx: CommittedTransaction, sequence: ChangeSequence): Promise<void> {
    await registerAndQueue(tx, withChanges(tx, sequence), mapLarge);
  }

  /** Registers the transaction with the checkpoint coordinator and queues its unit; synchronous when queueing is. */
  function registerAndQueue(
    tx: CommittedTransaction,
    unit: SourceTransaction,
    queueUnit: (unit: SourceTransaction, position: SinkPosition, sourceIdentity: string) => Queued | null | Promise<Queued | null>,
  ): Promise<void> | undefined {
    counts.received += 1;
    const payload: TxPayload = { tx: null, commitLsn: tx.commitLsn, xid: tx.xid, checkpoint: tx.position.checkpoint, systemId: tx.position.systemId };
    const seq = coordinator.received(tx.endLsn, payload);
    let queued: Queued | null | Promise<Queued | null>;
    try {
      queued = queueUnit(unit, { kind: 'transaction', checkpoint: tx.position.checkpoint, commitLsn: tx.commitLsn, xid: tx.xid, systemId: tx.position.systemId }, tx.position.systemId);
    } catch (error) {
      coordinator.fail(seq);
      throw error;
    }
    if (queued instanceof Promise) {
      return queued.then(
        (q) => afterQueued(tx, seq, q),
        (error: unknown) => {
          coordinator.fail(seq);
          throw error;
        },
      );
    }
    afterQueued(tx, seq, queued);
    return undefined;
  }

  /** A transaction is queued (or had nothing to append): acknowledge it once it and all before it are durable. */
  function afterQueued(tx: CommittedTransaction, seq: number, queued: Queued | null): void {
    const done = (): void => {
      const advanced = coordinator.complete(seq);
      if (advanced) {
        checkpointTarget = { ...advanced.payload, endLsn: advanced.endLsn };
        pumpCheckpoint();
      }
    };
    if (!queued) {
      counts.skipped += 1;
      done();
      return;
    }
    const commitMs = Date.parse(tx.commitTime);
    queued.durable.then(
      () => {
        counts.appended += 1;
        if (Number.isFinite(commitMs)) {
          lagLast = Math.max(0, Date.now() - commitMs);
          lagSum += lagLast;
          lagN += 1;
          lagWindow.add(lagLast);
        }
        done();
      },
      (error: unknown) => {
        coordinator.fail(seq);
        setFatal(error);
      },
    );
  }

  // ---- snapshots ---------------------------------------------------------------------------

  let snapshotStore: PipelineSnapshotStore | null = null;
  let snapshotProgress: SnapshotProgress | null = null;
  let incremental: IncrementalSnapshot | null = null;
  let snapshotInfo: { action: SnapshotSummary['action']; code: string; reason: string; generation: string | null; consistentPoint: Lsn | null; stopAfter: boolean } | null = null;
  /** Ad hoc snapshot requests: queued ones and the ids already taken (saved with the progress). */
  let requestState: SnapshotRequestState = { queued: [], handled: [] };
  /** Source system id for snapshot positions while streaming (set when a snapshot runs). */
  let snapshotSystemId: string | null = null;
  /** An ad hoc generation is being set up (its progress saving): a request arriving meanwhile queues. */
  let adHocStarting = false;
  const snapshotCounts = { rows: 0, events: 0 };
  /** Sink positions of snapshot records handed to the sink and not yet covered by saved progress (see snapshot-store.ts). */
  const pinned = new Map<string, PinnedPosition>();
  let snapshotSequence = 0;
  let snapshotDone = false;

  const pinKey = (record: SnapshotRecord): string => `${record.table}\u0000${canonicalKey(record.change.key)}`;

  async function saveSnapshotProgress(progress: SnapshotProgress): Promise<void> {
    await snapshotStore!.save(progress, pinned, requestState);
    snapshotProgress = progress;
  }

  /**
   * Hands snapshot records to the sink (map → validate → lanes, bounded by the lanes' in-flight
   * limit) and resolves when all are durable. Before the first append their positions are
   * recorded with the progress, so a record read again after a crash keeps its position and
   * the sink's receipt recognises it (DESIGN invariant 3). Progress itself is saved by the caller.
   */
  async function deliverSnapshotRecords(records: readonly SnapshotRecord[], lsn: Lsn, systemId: string, progress: SnapshotProgress): Promise<void> {
    if (records.length === 0) return;
    const positions = records.map((record) => {
      const key = pinKey(record);
      let position = pinned.get(key);
      if (!position) {
        position = { lsn, sequence: ++snapshotSequence };
        pinned.set(key, position);
      }
      return position;
    });
    await saveSnapshotProgress(progress);
    const durables: Promise<AppendOutcome>[] = [];
    for (let i = 0; i < records.length; i++) {
      const record = records[i]!;
      const position = positions[i]!;
      if (stopRequested && fatal) throw fatal;
      const queued = await handleUnit(
        record,
        { kind: 'snapshot', systemId, snapshotGeneration: record.snapshotGeneration, lsn: position.lsn, sequence: position.sequence, table: record.table, key: canonicalKey(record.change.key) },
        systemId,
      );
      if (queued) durables.push(queued.durable.then((outcome) => {
        snapshotCounts.events += (outcome?.appended ?? 0) + (outcome?.skipped ?? 0);
        return outcome;
      }));
    }
    snapshotCounts.rows += records.length;
    await Promise.all(durables);
    for (const record of records) pinned.delete(pinKey(record));
  }

  async function identifySystem(): Promise<{ systemId: string; timeline: number }> {
    const client = new pg.Client({ connectionString: config.source.connection, replication: 'database' } as pg.ClientConfig);
    client.on('error', () => undefined);
    await client.connect();
    try {
      const r = await client.query<{ systemid: string; timeline: string | number }>('IDENTIFY_SYSTEM');
      return { systemId: String(r.rows[0]!.systemid), timeline: Number(r.rows[0]!.timeline) };
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async function slotState(): Promise<{ exists: boolean; walStatus: string | null; confirmedFlushLsn: Lsn | null; active: boolean }> {
    const client = new pg.Client({ connectionString: config.source.connection });
    client.on('error', () => undefined);
    await client.connect();
    try {
      const { rows } = await client.query<{ confirmed_flush_lsn: string | null; wal_status: string | null; active: boolean }>(
        'SELECT confirmed_flush_lsn::text AS confirmed_flush_lsn, wal_status, active FROM pg_catalog.pg_replication_slots WHERE slot_name = $1',
        [config.source.slot],
      );
      const row = rows[0];
      return row ? { exists: true, walStatus: row.wal_status, confirmedFlushLsn: row.confirmed_flush_lsn, active: row.active } : { exists: false, walStatus: null, confirmedFlushLsn: null, active: false };
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async function dropSlot(): Promise<void> {
    const client = new pg.Client({ connectionString: config.source.connection });
    client.on('error', () => undefined);
    await client.connect();
    try {
      await client.query('SELECT pg_catalog.pg_drop_replication_slot($1)', [config.source.slot]);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** The snapshot store's state, read at start-up in parallel with the sinks' own start-up reads. */
  let storedSnapshotState: ReturnType<PipelineSnapshotStore['load']> | null = null;

  /** The start-up decision (docs/snapshots.md "Modes"), with the pipeline's refinements. */
  async function decideStart(storedLsn: Lsn | null): Promise<SnapshotDecision> {
    const mode = config.snapshot.mode;
    const stored = await (storedSnapshotState ?? snapshotStore!.load());
    storedSnapshotState = null;
    snapshotProgress = stored?.progress ?? null;
    requestState = stored?.requests ?? { queued: [], handled: [] };
    for (const [k, v] of stored?.pinned ?? []) pinned.set(k, v);
    const slot = await slotState();
    const progress = stored?.progress ?? null;
    if (
      progress && isSnapshotFinished(progress) && slot.exists && (progress.slot === config.source.slot || progress.kind !== 'initial') &&
      (mode === 'initial' || (mode === 'when_needed' && storedLsn === null))
    ) {
      // The latest snapshot is complete; streaming may not have recorded a position yet.
      const from = storedLsn ?? progress.consistentPoint;
      const gone = mode !== 'when_needed' ? null : from ? unservableReason(from, slot) : slot.walStatus === 'lost' ? { code: 'SLOT_LOST', reason: `the replication slot was invalidated (wal_status = 'lost')` } : null;
      if (gone === null) {
        return { action: 'stream', mode, generation: null, stopAfterSnapshot: false, recreateSlot: false, code: 'SNAPSHOT_DONE', reason: `snapshot generation ${progress.generation} is complete: streaming from slot ${config.source.slot}` };
      }
      const generation = nextGeneration(progress.generation);
      return {
        action: 'new-generation', mode, generation, stopAfterSnapshot: false, recreateSlot: true, code: gone.code,
        reason: `${gone.reason}; mode 'when_needed' starts snapshot generation ${generation} with a new slot (consumers see a new generation and reconcile)`,
      };
    }
    return decideSnapshot({ mode, storedLsn, slot, progress, lastGeneration: progress?.generation ?? null });
  }

  /** Creates the slot with an exported snapshot, reads every captured table at it and makes the records durable. */
  async function runInitialSnapshotPhase(decision: SnapshotDecision, systemId: string): Promise<void> {
    const generation = decision.generation!;
    if (decision.recreateSlot) {
      const slot = await slotState();
      if (slot.active) throw new EventAssemblerError('SNAPSHOT_SLOT_ACTIVE', `replication slot "${config.source.slot}" must be re-created for the initial snapshot (${decision.reason}), but another process is streaming from it`, { slot: config.source.slot });
      log.warn('snapshot: dropping the slot to re-create it with an exported snapshot', { slot: config.source.slot, reason: decision.reason });
      await dropSlot();
    }
    const exported = await createSlotWithSnapshot({ connection: config.source.connection, slot: config.source.slot });
    try {
      const tables = config.source.tables.map((t) => t.table);
      let progress = newSnapshotProgress({ generation, kind: 'initial', mode: config.snapshot.mode, tables, reason: decision.reason, slot: exported.slot, consistentPoint: exported.consistentPoint });
      pinned.clear();
      await saveSnapshotProgress(progress);
      snapshotInfo = { ...snapshotInfo!, consistentPoint: exported.consistentPoint };
      log.info('snapshot: slot created with an exported snapshot; reading captured tables', { slot: exported.slot, consistentPoint: exported.consistentPoint, generation, tables, parallelism: config.snapshot.parallelism });
      for await (const batch of readInitialSnapshot({
        connection: config.source.connection, snapshotName: exported.snapshotName, tables, snapshotGeneration: generation,
        parallelism: config.snapshot.parallelism, batchRows: config.snapshot.chunkSize, publications: config.source.publication,
      })) {
        if (stopRequested) break;
        await deliverSnapshotRecords(batch.records, exported.consistentPoint, systemId, progress);
        const entry = progress.tables.find((t) => t.table === batch.table)!;
        progress = updateTable(progress, batch.table, {
          status: batch.tableDone ? 'done' : 'running',
          lastKey: batch.lastKey ?? entry.lastKey,
          rowsDone: batch.rowsDone,
          estimatedRows: batch.estimatedRows,
          chunksDone: entry.chunksDone + (batch.records.length > 0 ? 1 : 0),
        });
        await saveSnapshotProgress(progress);
        if (batch.tableDone) log.info('snapshot: table done', { table: batch.table, rows: batch.rowsDone, generation });
      }
      if (isSnapshotFinished(progress)) {
        snapshotDone = true;
        log.info('snapshot: complete', { generation, rows: snapshotCounts.rows, events: snapshotCounts.events, consistentPoint: exported.consistentPoint });
        await recordConsistentPoint(exported.consistentPoint, systemId);
      }
    } finally {
      await exported.close();
    }
  }

  /**
   * A complete initial snapshot makes its consistent point durable (everything before it is in
   * the snapshot): record it in the checkpoint stream, so that a restart before anything streams
   * compares the new slot with the new position — not with the previous slot's last one, which
   * would look like a slot advanced past the checkpoint. The slot is not acknowledged here.
   */
  async function recordConsistentPoint(lsn: Lsn, systemId: string): Promise<void> {
    if (!checkpointSink || (recordedLsn !== null && compareLsn(lsn, recordedLsn) <= 0)) return;
    const { timeline } = await identifySystem();
    const position = makeSourcePosition({ systemId, timeline, slot: config.source.slot, commitLsn: lsn, xid: 0 });
    await checkpointSink.append(checkpointEvent({ tx: null, commitLsn: lsn, xid: 0, checkpoint: position.checkpoint, systemId, endLsn: lsn }, true));
    recordedLsn = lsn;
  }

  /**
   * Runs `progress` as an incremental (watermark) snapshot while streaming: the rest of an
   * interrupted snapshot (same generation) or an ad hoc one. When it is done, the next queued
   * ad hoc request starts.
   */
  function startIncremental(progress: SnapshotProgress, resumed: boolean): void {
    incremental = createIncrementalSnapshot({
      connection: config.source.connection,
      progress,
      store: { load: () => Promise.resolve(snapshotProgress), save: (p) => saveSnapshotProgress(p) },
      chunkSize: config.snapshot.chunkSize,
      publications: config.source.publication,
      onRetry: (chunk, attempt) => log.warn('snapshot: chunk must be read again', { table: chunk.table, attempt, blockedBy: chunk.blockedBy }),
    });
    const inc = incremental;
    if (resumed) log.info('snapshot: resuming the interrupted snapshot incrementally while streaming', { generation: progress.generation, kind: progress.kind, tables: progress.tables.filter((t) => t.status !== 'done').map((t) => ({ table: t.table, status: t.status, lastKey: t.lastKey })) });
    void inc.run().then(
      (final) => {
        snapshotDone = true;
        incremental = null;
        void inc.close();
        log.info(resumed ? 'snapshot: complete (resumed)' : 'snapshot: complete', { generation: final.generation, kind: final.kind, rows: snapshotCounts.rows, events: snapshotCounts.events });
        if (snapshotInfo?.stopAfter) {
          stopReason = 'snapshot-done';
          stopRequested = true;
          wakeStop();
          return;
        }
        startNextRequest();
      },
      (error: unknown) => {
        if (!stopRequested) setFatal(error);
      },
    );
  }

  /** Starts the oldest queued ad hoc request, if any and nothing runs. */
  function startNextRequest(): void {
    const next = requestState.queued[0];
    if (!next || incremental || adHocStarting || stopRequested) return;
    requestState = { ...requestState, queued: requestState.queued.slice(1) };
    startAdHoc(next, next.lsn).catch((error: unknown) => {
      if (!stopRequested) setFatal(error);
    });
  }

  /** Why the request's tables cannot be snapshotted (not captured, missing, no key), or `null`. */
  async function refuseRequestTables(request: SnapshotRequest): Promise<string | null> {
    const captured = config.source.tables.map((t) => t.table);
    const uncaptured = request.tables.filter((t) => !captured.includes(t));
    if (uncaptured.length > 0) return `not captured by this assembler: ${uncaptured.join(', ')} (captured: ${captured.join(', ')})`;
    const client = new pg.Client({ connectionString: config.source.connection });
    client.on('error', () => undefined);
    await client.connect();
    try {
      for (const table of request.tables) requireKey(await describeTable(client, table, { publications: config.source.publication }));
      return null;
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /**
   * A new generation of the requested tables, read incrementally while streaming. The progress
   * (with the request) is saved before returning — i.e. before the request's transaction can be
   * acknowledged — so a crash either re-sends the request or resumes this generation.
   */
  async function startAdHoc(request: SnapshotRequest, lsn: Lsn): Promise<void> {
    adHocStarting = true;
    try {
      await startAdHocNow(request, lsn);
    } finally {
      adHocStarting = false;
    }
  }

  async function startAdHocNow(request: SnapshotRequest, lsn: Lsn): Promise<void> {
    const previousGeneration = snapshotProgress?.generation ?? null;
    const progress = adHocSnapshotProgress({
      tables: request.tables,
      capturedTables: config.source.tables.map((t) => t.table),
      lastGeneration: previousGeneration,
      reason: `ad hoc snapshot of ${request.tables.join(', ')} requested${request.requestedBy ? ` by ${request.requestedBy}` : ''} at ${request.requestedAt} (request ${request.id}, message at ${lsn})`,
      request: { id: request.id, lsn },
    });
    pinned.clear();
    await saveSnapshotProgress(progress);
    snapshotDone = false;
    snapshotInfo = { action: 'ad-hoc-snapshot', code: 'SNAPSHOT_REQUESTED', reason: progress.reason, generation: progress.generation, consistentPoint: null, stopAfter: false };
    log.info('snapshot: ad hoc snapshot started as a new generation', { generation: progress.generation, previousGeneration, tables: request.tables, request: request.id, lsn, queued: requestState.queued.length });
    startIncremental(progress, false);
  }

  /**
   * One transaction from the source, whichever way it has to go: synchronous (no promise) for a
   * transaction in memory with no ad hoc snapshot request in it while no snapshot runs — the
   * common case — else a promise.
   */
  function handleTaken(tx: CommittedTransaction): Promise<void> | undefined {
    const inc = incremental;
    if (inc && snapshotSystemId) return handleWithWindow(tx, inc, snapshotSystemId);
    if (isLargeTransaction(tx)) return handleLarge(tx);
    // Small transactions are in memory anyway: look for ad hoc snapshot requests (their own tiny
    // transactions, see source/snapshot/request.ts) before handing the changes on.
    const changes = readChangesNow(tx);
    if (changes === null) return readChanges(tx).then((read) => handleChanges(tx, read));
    return handleChanges(tx, changes);
  }

  function handleChanges(tx: CommittedTransaction, changes: Change[]): Promise<void> | undefined {
    if (hasSnapshotRequest(changes)) return takeSnapshotRequests(tx, changes).then(() => handleTransaction(tx, changes));
    return handleTransaction(tx, changes);
  }

  /** A large transaction: its spill file (if any) is released once all of it is queued. */
  async function handleLarge(tx: CommittedTransaction): Promise<void> {
    try {
      const sequence = tx.sequence();
      // Requests come in tiny transactions of their own; a large one is read for them only when it holds messages.
      if (tx.messageCount > 0) await takeSnapshotRequests(tx, sequence);
      await handleLargeTransaction(tx, sequence);
    } finally {
      await tx.release();
    }
  }

  function hasSnapshotRequest(changes: readonly Change[]): boolean {
    for (const change of changes) if (change.op === 'message' && change.prefix === SNAPSHOT_REQUEST_PREFIX) return true;
    return false;
  }

  /**
   * The hook of the transaction loop: ad hoc snapshot requests (`event-assembler snapshot`) in a
   * committed transaction's messages. Resolves once each is durable in the snapshot store
   * (started, queued or refused) — before the transaction is handed on, so before it can be
   * acknowledged.
   */
  async function takeSnapshotRequests(tx: CommittedTransaction, changes: Iterable<Change>): Promise<void> {
    const messages: MessageChange[] = [];
    for (const change of changes) if (change.op === 'message' && change.prefix === SNAPSHOT_REQUEST_PREFIX) messages.push(change);
    for (const change of messages) {
      const request = decodeSnapshotRequest(change.content);
      if (!request) {
        log.warn('snapshot: ignoring a malformed snapshot request message', { lsn: change.lsn, commitLsn: tx.commitLsn });
        continue;
      }
      // Another assembler's request, or one the slot re-sends after a restart.
      if (request.assembler !== config.name || requestState.handled.includes(request.id)) continue;
      if (!snapshotStore) {
        log.warn('snapshot: ad hoc snapshot request ignored: this assembler runs with a custom sink and keeps no snapshot state', { request: request.id, lsn: change.lsn });
        continue;
      }
      snapshotSystemId ??= tx.position.systemId;
      requestState = { ...requestState, handled: [...requestState.handled, request.id].slice(-HANDLED_REQUESTS_KEPT) };
      const refused = await refuseRequestTables(request);
      if (refused !== null) {
        log.warn('snapshot: ad hoc snapshot request refused', { request: request.id, tables: request.tables, lsn: change.lsn, reason: refused });
        if (snapshotProgress) await saveSnapshotProgress(snapshotProgress);
        continue;
      }
      if (incremental !== null || adHocStarting || (snapshotProgress !== null && !isSnapshotFinished(snapshotProgress))) {
        requestState = { ...requestState, queued: [...requestState.queued, { ...request, lsn: change.lsn }] };
        await saveSnapshotProgress(snapshotProgress!);
        log.info('snapshot: ad hoc snapshot request queued behind the running snapshot', { request: request.id, tables: request.tables, lsn: change.lsn, running: snapshotProgress?.generation ?? null, queued: requestState.queued.length });
        continue;
      }
      await startAdHoc(request, change.lsn);
    }
  }

  /** While an incremental snapshot runs, every transaction passes its watermark window. */
  async function handleWithWindow(tx: CommittedTransaction, inc: IncrementalSnapshot, systemId: string): Promise<void> {
    const large = isLargeTransaction(tx);
    try {
      const changes: ChangeSequence = large ? tx.sequence() : await readChanges(tx);
      if (!large || tx.messageCount > 0) await takeSnapshotRequests(tx, changes);
      const outputs = inc.window.accept({ xid: tx.xid }, changes);
      let records: SnapshotRecord[] = [];
      for (const output of outputs) {
        if (output.kind === 'transaction') await (large ? handleLargeTransaction(tx, changes) : handleTransaction(tx, changes as Change[]));
        else if (output.kind === 'snapshot') records.push(output.record);
        else {
          await deliverSnapshotRecords(records, tx.commitLsn, systemId, inc.progress());
          records = [];
          await inc.chunkDurable(output.chunk);
        }
      }
    } finally {
      if (large) await tx.release();
    }
  }

  function snapshotSummary(): SnapshotSummary | null {
    if (!snapshotInfo) return null;
    return {
      action: snapshotInfo.action, code: snapshotInfo.code, reason: snapshotInfo.reason, generation: snapshotInfo.generation,
      rows: snapshotCounts.rows, events: snapshotCounts.events,
      finished: snapshotDone || (snapshotProgress !== null && isSnapshotFinished(snapshotProgress)),
      consistentPoint: snapshotInfo.consistentPoint,
    };
  }

  // ---- run / stop --------------------------------------------------------------------------

  async function closeAll(): Promise<void> {
    await incremental?.close().catch(() => undefined);
    await source?.close().catch(() => undefined);
    await Promise.allSettled([appendSink?.close(), checkpointSink?.close(), snapshotStore?.close()]);
  }

  async function runOnce(): Promise<RunSummary> {
    state = 'starting';
    let idleTimer: ReturnType<typeof setInterval> | null = null;
    let reason: RunSummary['reason'] = 'stopped';
    try {
      const registry = await loadContractRegistry(config.contracts.dir);
      checkContract = createContractCheck(registry, config);
      const sinkOptions = {
        connectionString: config.destination.connectionString,
        assembler: config.name,
        mode: config.destination.mode,
        logger: log,
        checkpointStream: false as const,
        maxCachedStreams: config.limits.maxCachedStreams,
        ...(config.destination.maxAppendSize !== undefined ? { maxAppendSize: config.destination.maxAppendSize } : {}),
        ...(config.destination.timeoutMs !== undefined ? { timeoutMs: config.destination.timeoutMs } : {}),
        ...(config.destination.retry !== undefined ? { retry: config.destination.retry } : {}),
      };
      let lastRead: Awaited<ReturnType<typeof readLastCheckpoint>> = null;
      if (deps.sink) {
        appendSink = deps.sink;
        mode = (deps.sink as Partial<KurrentDBSink>).mode ?? null;
      } else {
        // Independent start-up round trips (each sink's server-feature check and log-head read,
        // the checkpoint stream's tail, the snapshot progress) go in parallel: one after the
        // other they took 1.2 s against the in-memory server (each new client's first read ≈ 0.5 s).
        snapshotStore = createKurrentDBSnapshotStore(config.destination.connectionString, config.name);
        storedSnapshotState = snapshotStore.load();
        storedSnapshotState.catch(() => undefined); // reported when decideStart awaits it
        const [checkpointSide, appendSide, lastSide] = await Promise.allSettled([
          createKurrentDBSink({ ...sinkOptions, logger: { info() {}, warn: log.warn } }),
          createKurrentDBSink({ ...sinkOptions, logger: log }),
          readLastCheckpoint(),
        ]);
        if (checkpointSide.status === 'fulfilled') checkpointSink = checkpointSide.value;
        if (appendSide.status === 'fulfilled') appendSink = appendSide.value;
        const failed = [checkpointSide, appendSide, lastSide].find((r) => r.status === 'rejected');
        if (failed) throw (failed as PromiseRejectedResult).reason;
        mode = checkpointSink!.mode;
        lastRead = (lastSide as PromiseFulfilledResult<Awaited<ReturnType<typeof readLastCheckpoint>>>).value;
      }
      appender = createAppender(appendSink!, {
        maxConcurrentAppends: config.limits.maxConcurrentAppends,
        maxBatchUnits: config.limits.maxBatchTransactions,
        maxBatchEvents: config.limits.maxBatchEvents,
      });

      let slotConfirmed: Lsn | null = null;
      let last: Awaited<ReturnType<typeof readLastCheckpoint>> = null;
      if (checkpointSink) {
        last = lastRead;
        slotConfirmed = await checkSlotAgainstCheckpoint(last);
        // What the slot already confirmed is durable by definition of the check above.
        recordedLsn = last?.endLsn ?? slotConfirmed;
        if (recordedLsn && slotConfirmed && compareLsn(slotConfirmed, recordedLsn) > 0) recordedLsn = slotConfirmed;
      }

      let resumeFrom: SnapshotProgress | null = null;
      if (!snapshotStore && config.snapshot.mode !== 'never') snapshotStore = createKurrentDBSnapshotStore(config.destination.connectionString, config.name);
      if (config.snapshot.mode === 'never') {
        // No snapshot of its own, but an interrupted ad hoc snapshot resumes (and queued requests
        // start). With a custom sink (benchmarks) the destination is never contacted: no snapshot state.
        const decision = snapshotStore ? await decideStart(last?.endLsn ?? null) : null;
        if (decision?.action === 'resume-snapshot') {
          snapshotInfo = { action: decision.action, code: decision.code, reason: decision.reason, generation: decision.generation, consistentPoint: null, stopAfter: false };
          log.info('snapshot: decision', { mode: config.snapshot.mode, action: decision.action, code: decision.code, reason: decision.reason, generation: decision.generation, progressStream: snapshotProgressStreamName(config.name) });
          resumeFrom = snapshotProgress;
          snapshotSystemId = (await identifySystem()).systemId;
        }
      } else {
        const decision = await decideStart(last?.endLsn ?? null);
        const previousGeneration = snapshotProgress?.generation ?? null;
        snapshotInfo = { action: decision.action, code: decision.code, reason: decision.reason, generation: decision.generation, consistentPoint: snapshotProgress?.consistentPoint ?? null, stopAfter: decision.stopAfterSnapshot };
        log.info('snapshot: decision', { mode: config.snapshot.mode, action: decision.action, code: decision.code, reason: decision.reason, generation: decision.generation, progressStream: snapshotProgressStreamName(config.name) });
        switch (decision.action) {
          case 'refuse':
            throw new RebuildNeededError(decision.reason, { slot: config.source.slot, code: decision.code });
          case 'stop':
            stopReason = 'snapshot-done';
            throw new StopBeforeStart();
          case 'new-generation':
          case 'initial-snapshot':
            // The stored progress belongs to the previous generation: status must not call this one finished.
            snapshotProgress = null;
            if (decision.action === 'new-generation') {
              // Never silent: consumers see a new generation of every captured table and reconcile.
              log.warn('snapshot: the stored position cannot be served; starting a new snapshot generation with a new slot', {
                previousGeneration, generation: decision.generation, code: decision.code, reason: decision.reason, slot: config.source.slot,
              });
            }
            if (stopRequested) throw new StopBeforeStart();
            state = 'running';
            snapshotSystemId = (await identifySystem()).systemId;
            await runInitialSnapshotPhase(decision, snapshotSystemId);
            if (stopRequested) throw new StopBeforeStart();
            if (!snapshotDone) throw new Error('unreachable: initial snapshot ended unfinished');
            if (decision.stopAfterSnapshot) {
              stopReason = 'snapshot-done';
              throw new StopBeforeStart();
            }
            break;
          case 'resume-snapshot':
            resumeFrom = snapshotProgress;
            snapshotSystemId = (await identifySystem()).systemId;
            break;
          case 'stream':
            snapshotDone = snapshotProgress !== null && isSnapshotFinished(snapshotProgress);
            break;
        }
      }

      source =
        deps.source ??
        createPostgresSource({
          connection: config.source.connection,
          slot: config.source.slot,
          publication: config.source.publication,
          tables: config.source.tables,
          maxInFlightTransactions: config.limits.maxInFlightTransactions,
          maxInFlightBytes: config.limits.maxInFlightBytes,
          memoryLimitBytes: config.limits.memoryLimitBytes,
          ...(config.source.statusIntervalMs !== undefined ? { statusIntervalMs: config.source.statusIntervalMs } : {}),
          ...(config.source.spillDir !== undefined ? { spillDir: config.source.spillDir } : {}),
          ...(checkpointSink ? { idleAcknowledgeLimit: () => recordedLsn } : {}),
          onReconnect: (error, delayMs, attempt) => log.warn('source: connection lost, reconnecting', { error: errorInfo(error), delayMs, attempt }),
        });
      if (stopRequested) throw new StopBeforeStart();
      const report = await source.start();
      state = 'running';
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
        ...(snapshotInfo ? { snapshotAction: snapshotInfo.action } : {}),
        contractViolation: config.failurePolicy.contractViolation,
        lastCheckpoint: last?.endLsn ?? null,
        slotConfirmedFlushLsn: slotConfirmed,
        checks: report ? 'passed' : 'skipped',
      });
      if (checkpointSink) {
        idleTimer = setInterval(() => void idleCheckpoint(), IDLE_CHECKPOINT_INTERVAL_MS);
        idleTimer.unref?.();
      }
      if (resumeFrom) startIncremental(resumeFrom, true);
      else if (requestState.queued.length > 0) {
        // Requests queued behind a snapshot that finished just before the last stop.
        snapshotSystemId ??= (await identifySystem()).systemId;
        startNextRequest();
      }

      const iterator = source.transactions()[Symbol.asyncIterator]();
      for (;;) {
        if (stopRequested) break;
        // A queue of transactions is taken one by one without waiting; the iterator when it is empty.
        const queuedNow = source.takeNow();
        if (queuedNow) {
          const pending = handleTaken(queuedNow);
          if (pending) await pending;
          continue;
        }
        const next = iterator.next();
        const winner = await untilStop(next);
        if (winner === 'stop') {
          // The pending next() settles when the source closes; a transaction it yields is not acknowledged (replayed later).
          void next.then((r) => (r.done ? undefined : r.value.release()), () => undefined);
          break;
        }
        if (winner.done) {
          reason = 'source-ended';
          break;
        }
        if (stopRequested) {
          await winner.value.release();
          break;
        }
        const pending = handleTaken(winner.value);
        if (pending) await pending;
      }
    } catch (error) {
      if (!(error instanceof StopBeforeStart)) setFatal(error);
    }
    // Drain: what is queued gets appended (or fails), the durable prefix is recorded and acknowledged.
    state = fatal ? 'failed' : 'stopping';
    if (idleTimer) clearInterval(idleTimer);
    await appender?.drain();
    await flushCheckpoints();
    await closeAll();
    const result = summary(stopReason ?? reason);
    if (fatal) {
      state = 'failed';
      log.error('assembler stopped after a fatal error', { ...result, error: errorInfo(fatal) });
      throw fatal;
    }
    state = 'stopped';
    log.info('assembler stopped', { ...result, sink: aggregateSinkStatus() });
    return result;
  }

  /** The appender's sink and the checkpoint writer as one: retrying when either is. */
  function aggregateSinkStatus(): SinkStatus | null {
    const all = [...(appendSink ? [appendSink] : []), ...(checkpointSink ? [checkpointSink] : [])]
      .filter((sink): sink is KurrentDBSink => typeof (sink as Partial<KurrentDBSink>).status === 'function')
      .map((sink) => sink.status());
    if (all.length === 0) return null;
    const lastError = all.map((s) => s.lastError).filter((e) => e !== null).sort((a, b) => b.at.getTime() - a.at.getTime())[0] ?? null;
    return {
      mode: all[0]!.mode,
      state: all.some((s) => s.state === 'retrying') ? 'retrying' : all.every((s) => s.state === 'closed') ? 'closed' : 'connected',
      attempts: Math.max(...all.map((s) => s.attempts)),
      retries: all.reduce((n, s) => n + s.retries, 0),
      lastError,
      cachedStreams: all.reduce((n, s) => n + s.cachedStreams, 0),
      appendedEvents: all.reduce((n, s) => n + s.appendedEvents, 0),
      skippedEvents: all.reduce((n, s) => n + s.skippedEvents, 0),
      tailReads: all.reduce((n, s) => n + (s.tailReads ?? 0), 0),
      logHeadReads: all.reduce((n, s) => n + (s.logHeadReads ?? 0), 0),
      // The appender's sink decides first touches (the checkpoint writer touches one stream).
      ...(all[0]!.firstTouch ? { firstTouch: all[0]!.firstTouch } : {}),
      splitCalls: all.reduce((n, s) => n + (s.splitCalls ?? 0), 0),
    };
  }

  function batchingStatus(): AssemblerStatus['batching'] {
    const stats = appender?.stats ?? { calls: 0, units: 0, largestBatch: 0 };
    return { calls: stats.calls, unitsPerCall: stats.calls > 0 ? Math.round((stats.units / stats.calls) * 10) / 10 : null, largestBatch: stats.largestBatch };
  }

  function summary(reason: RunSummary['reason']): RunSummary {
    return {
      reason,
      transactions: { received: counts.received, appended: counts.appended, skipped: counts.skipped, parked: counts.parkedTx },
      events: { appended: counts.eventsAppended, replaySkipped: counts.replaySkipped, byType: { ...byType } },
      parked: { mapperFailures: counts.mapperFailures, contractViolations: counts.contractViolations },
      acknowledgedLsn,
      mode,
      durationMs: Date.now() - startedAt,
      snapshot: snapshotSummary(),
    };
  }

  return {
    run() {
      runPromise ??= runOnce();
      return runPromise;
    },
    async stop() {
      stopRequested = true;
      wakeStop();
      if (!runPromise) {
        state = 'stopped';
        return;
      }
      await runPromise.then(
        () => undefined,
        () => undefined,
      );
    },
    status(): AssemblerStatus {
      const s = source?.status() ?? null;
      const durable = coordinator.acknowledgeable?.endLsn ?? null;
      const received = s?.receivedLsn ?? coordinator.receivedLsn;
      let bytes: number | null = null;
      try {
        if (received && acknowledgedLsn) bytes = Math.max(0, lsnDistance(acknowledgedLsn, received));
      } catch {
        bytes = null;
      }
      const sinkStatus = aggregateSinkStatus();
      return {
        name: config.name,
        state,
        mode,
        concurrentAppends: config.limits.maxConcurrentAppends,
        batching: batchingStatus(),
        transactions: { received: counts.received, appended: counts.appended, skipped: counts.skipped, inFlight: coordinator.pending, sliced: counts.sliced },
        events: { appended: counts.eventsAppended, replaySkipped: counts.replaySkipped, byType: { ...byType } },
        parked: { mapperFailures: counts.mapperFailures, contractViolations: counts.contractViolations },
        lag: {
          receivedLsn: received ?? null,
          durableLsn: durable,
          acknowledgedLsn,
          bytes,
          commitToAppendMs: lagLast,
          commitToAppendAvgMs: lagN > 0 ? Math.round(lagSum / lagN) : null,
          commitToAppendPercentiles: lagWindow.percentiles(),
        },
        source: s,
        sink: sinkStatus,
        lastError: fatal ? errorInfo(fatal) : s?.lastError ? errorInfo(s.lastError) : null,
        snapshot: snapshotInfo ? { ...snapshotSummary()!, progress: snapshotProgress } : null,
      };
    },
  };
}

/** The last `size` commit → append samples (a ring), with percentiles computed on demand. */
function createLagWindow(size: number) {
  const samples: number[] = [];
  let next = 0;
  // status() may be polled often: sort at most every 250 ms (and only when samples came in).
  let cached: { samples: number; p50Ms: number; p99Ms: number; maxMs: number } | null = null;
  let cachedAt = 0;
  let fresh = false;
  return {
    add(ms: number): void {
      fresh = true;
      if (samples.length < size) samples.push(ms);
      else {
        samples[next] = ms;
        next = (next + 1) % size;
      }
    },
    percentiles(): { samples: number; p50Ms: number; p99Ms: number; maxMs: number } | null {
      if (samples.length === 0) return null;
      const now = Date.now();
      if (cached && (!fresh || now - cachedAt < 250)) return cached;
      fresh = false;
      cachedAt = now;
      const sorted = [...samples].sort((a, b) => a - b);
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
      cached = { samples: sorted.length, p50Ms: Math.round(at(0.5)), p99Ms: Math.round(at(0.99)), maxMs: Math.round(sorted[sorted.length - 1]!) };
      return cached;
    },
  };
}
