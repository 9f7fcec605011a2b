/**
 * Transaction handling: the one place a source unit — a committed transaction, or a snapshot
 * record with its snapshot position — becomes appended events. Map → validate (park or halt) →
 * queue on the appender's lanes; a committed transaction is also registered with the checkpoint
 * coordinator, and once it and every one before it are durable the checkpoint writer records
 * and acknowledges the new prefix.
 *
 * Synchronous (no promise per transaction) when the changes are in memory and the appender has
 * room — the common case; else a promise. A unit of more than SLICED_UNIT_EVENTS events goes in
 * slices, a large transaction through its change sequence (large-units.ts).
 */
import { readChanges, readChangesNow, withChanges, type CommittedTransaction } from '../buffer/index.js';
import { mapUnit, type AnyMapper, type FailedRecord, type MapResult } from '../mapping/index.js';
import { SLICED_UNIT_EVENTS, type SinkEvent, type SinkMode, type SinkPosition } from '../sink/index.js';
import type { Change, ChangeSequence, SourceTransaction, SourceUnit } from '../source/types.js';
import type { Appender, AppendReceiver } from './appender.js';
import type { CheckpointCoordinator } from './checkpoint-coordinator.js';
import type { CheckpointWriter } from './checkpoint-writer.js';
import type { ContractCheck } from './contract-check.js';
import { createLargeUnits, type Queued } from './large-units.js';
import { PendingUnit, type UnitCounter } from './pending-unit.js';
import type { Logger } from './logger.js';
import type { RunControl } from './run-control.js';
import type { RunStats } from './run-stats.js';
import type { TxPayload } from './types.js';

export interface TransactionHandlerDeps {
  readonly assembler: string;
  readonly mappers: readonly AnyMapper[];
  readonly maxInFlightTransactions: number;
  readonly control: RunControl;
  readonly stats: RunStats;
  readonly coordinator: CheckpointCoordinator<TxPayload>;
  readonly checkpoints: Pick<CheckpointWriter, 'advance'>;
  readonly log: Logger;
  appender(): Appender;
  checkContract(): ContractCheck;
  mode(): SinkMode | null;
}

export interface TransactionHandler {
  /**
   * Maps, validates and queues one unit; gives its durability (`null`: nothing to append).
   * `mapped`: the unit's {@link TransactionHandler.mapUnit} result, when the caller mapped it ahead.
   */
  handleUnit(unit: SourceUnit, position: SinkPosition, sourceIdentity: string, mapped?: MapResult): Queued | null | Promise<Queued | null>;
  /** Maps one unit and nothing else (no validation, no queueing, no counts): for a caller that maps ahead of handing it to `handleUnit`. */
  mapUnit(unit: SourceUnit, sourceIdentity: string): MapResult;
  /**
   * A committed transaction (changes in memory, or read from its spill file when not given).
   * `gate`: what must also be durable before it may be acknowledged (a resumed snapshot's
   * before-image records and marks, snapshot-first-change.ts).
   */
  handleTransaction(tx: CommittedTransaction, materialized?: Change[], gate?: Promise<void> | null): Promise<void> | undefined;
  /** A large transaction, mapped from its change sequence (which must stay readable until this resolves). */
  handleLargeTransaction(tx: CommittedTransaction, sequence: ChangeSequence, gate?: Promise<void> | null): Promise<void>;
  /**
   * A heartbeat transaction: nothing to map or append; registered so its position is
   * acknowledged in order (counted in `stats.heartbeats`, not as a received transaction).
   */
  handleHeartbeat(tx: CommittedTransaction): undefined;
}

type QueueUnit = (unit: SourceTransaction, position: SinkPosition, sourceIdentity: string) => Queued | null | Promise<Queued | null>;

const NO_RECORDS: readonly FailedRecord[] = Object.freeze([]);

interface TransactionAcks {
  durable(seq: number, commitTime: string): void;
  failed(seq: number, error: unknown): void;
}

/** A transaction waiting for its unit: one object (its fields), no callbacks. */
class TransactionAck implements AppendReceiver {
  constructor(
    private readonly acks: TransactionAcks,
    private readonly seq: number,
    private readonly commitTime: string,
  ) {}

  appended(): void {
    this.acks.durable(this.seq, this.commitTime);
  }

  failed(error: unknown): void {
    this.acks.failed(this.seq, error);
  }
}

export function createTransactionHandler(deps: TransactionHandlerDeps): TransactionHandler {
  const { control, stats, coordinator, log } = deps;
  const { counts, byType } = stats;
  const full = (): boolean => deps.appender().inFlight >= deps.maxInFlightTransactions;

  function validateEvents(events: MapResult['events'], unit: SourceUnit): { ok: MapResult['events'][number][]; parked: FailedRecord[] } {
    const ok: MapResult['events'][number][] = [];
    const parked: FailedRecord[] = [];
    const check = deps.checkContract();
    for (const event of events) {
      const record = check(event, unit);
      if (record) parked.push(record);
      else ok.push(event);
    }
    return { ok, parked };
  }

  function countParked(record: SinkEvent): void {
    const mapper = record.metadata['mapper'] ?? '(unknown)';
    stats.recordFailed(record.type, mapper, {
      kind: record.type, mapper, stream: record.stream, id: record.id,
      commitLsn: record.metadata['source.commitLsn'] ?? null, xid: record.metadata['source.xid'] ?? null,
      diagnosis: diagnosisText(record.data),
    });
  }

  /** One line of why: the mapper's error, or the contract's violations. */
  function diagnosisText(data: unknown): string {
    const d = data as { cause?: { name?: string; message?: string }; violations?: readonly { path: string; message: string }[] } | null;
    if (d?.cause) return `${d.cause.name ?? 'Error'}: ${d.cause.message ?? ''}`;
    if (d?.violations) return d.violations.map((v) => `${v.path || '/'} ${v.message}`).join('; ');
    return 'no diagnosis';
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

  /** Counts a durable unit's outcome (the queued unit holds only its event types for this, not its events). */
  const counter: UnitCounter = {
    count(outcome, types, parked) {
      counts.eventsAppended += outcome?.appended ?? 0;
      counts.replaySkipped += outcome?.skipped ?? 0;
      if (typeof types === 'string') byType[types] = (byType[types] ?? 0) + 1;
      else for (const type of types) byType[type] = (byType[type] ?? 0) + 1;
      if (parked) counts.parkedTx += 1;
    },
  };

  /** A unit's mapped events validated and queued: whole, or in slices when it has more than SLICED_UNIT_EVENTS. */
  function queueMapped(unit: SourceUnit, position: SinkPosition, mapped: MapResult): Queued | null | Promise<Queued | null> {
    const total = mapped.events.length + mapped.failed.length;
    if (total > SLICED_UNIT_EVENTS) return large.queueSliced(unit, position, total, mapped.failed, mapped.events);
    const { ok, parked } = validateEvents(mapped.events, unit);
    const failed = mapped.failed.length === 0 && parked.length === 0 ? NO_RECORDS : [...mapped.failed, ...parked];
    for (const record of failed) {
      countParked(record);
      logParked(record);
    }
    counts.mapperFailures += mapped.failed.length;
    counts.contractViolations += parked.length;
    const events: SinkEvent[] = failed.length === 0 ? ok : [...ok, ...failed];
    if (events.length === 0) return null;
    const pending = new PendingUnit(counter, ok.length === 1 ? ok[0]!.type : ok.map((e) => e.type), failed.length > 0);
    const queue = (): Queued => {
      if (control.stopRequested && control.fatal) throw control.fatal;
      deps.appender().appendTo({ position, events }, pending);
      return pending;
    };
    if (full()) return control.until(deps.appender().whenBelow(deps.maxInFlightTransactions)).then(queue);
    return queue();
  }

  const large = createLargeUnits({
    mappers: deps.mappers,
    assembler: deps.assembler,
    log,
    counts,
    byType,
    appender: deps.appender,
    checkContract: deps.checkContract,
    mode: deps.mode,
    stopping: () => control.stopRequested,
    fatal: () => control.fatal,
    logParked,
    countParked,
    queueWhole: queueMapped,
  });

  function mapOne(unit: SourceUnit, sourceIdentity: string): MapResult {
    return mapUnit(deps.mappers, unit, { assembler: deps.assembler, sourceIdentity });
  }

  function handleUnit(unit: SourceUnit, position: SinkPosition, sourceIdentity: string, mapped?: MapResult): Queued | null | Promise<Queued | null> {
    return queueMapped(unit, position, mapped ?? mapOne(unit, sourceIdentity));
  }

  /** Registers the transaction with the checkpoint coordinator and queues its unit; synchronous when queueing is. */
  function registerAndQueue(tx: CommittedTransaction, unit: SourceTransaction, queueUnit: QueueUnit, gate?: Promise<void> | null): Promise<void> | undefined {
    counts.received += 1;
    const { checkpoint, systemId } = tx.position;
    const seq = coordinator.received(tx.endLsn, { tx: null, commitLsn: tx.commitLsn, xid: tx.xid, checkpoint, systemId, commitTime: tx.commitTime });
    let queued: Queued | null | Promise<Queued | null>;
    try {
      queued = queueUnit(unit, { kind: 'transaction', checkpoint, commitLsn: tx.commitLsn, xid: tx.xid, systemId }, systemId);
    } catch (error) {
      coordinator.fail(seq);
      throw error;
    }
    if (queued instanceof Promise) {
      return queued.then(
        (q) => afterQueued(tx.commitTime, seq, q, gate),
        (error: unknown) => {
          coordinator.fail(seq);
          throw error;
        },
      );
    }
    afterQueued(tx.commitTime, seq, queued, gate);
    return undefined;
  }

  /**
   * A transaction is queued (or had nothing to append): acknowledge it once it and all before it
   * are durable. Given its commit time, not the transaction: what waits for the append would
   * otherwise hold every decoded row of every transaction in flight.
   */
  function afterQueued(commitTime: string, seq: number, queued: Queued | null, gate?: Promise<void> | null): void {
    if (gate) {
      gate.then(
        () => afterQueued(commitTime, seq, queued),
        (error: unknown) => {
          coordinator.fail(seq);
          control.fail(error);
        },
      );
      return;
    }
    if (!queued) {
      counts.skipped += 1;
      complete(seq);
      return;
    }
    if (queued instanceof PendingUnit) queued.listen(new TransactionAck(acks, seq, commitTime));
    else queued.durable.then(() => acks.durable(seq, commitTime), (error: unknown) => acks.failed(seq, error));
  }

  function complete(seq: number): void {
    const advanced = coordinator.complete(seq);
    if (advanced) deps.checkpoints.advance({ ...advanced.payload, endLsn: advanced.endLsn });
  }

  /** What a transaction's acknowledgement does once its unit is durable, or failed. */
  const acks: TransactionAcks = {
    durable(seq, commitTime) {
      try {
        counts.appended += 1;
        stats.recordLag(commitTime);
        complete(seq);
      } catch (error) {
        control.fail(error);
      }
    },
    failed(seq, error) {
      coordinator.fail(seq);
      control.fail(error);
    },
  };

  function handleTransaction(tx: CommittedTransaction, materialized?: Change[], gate?: Promise<void> | null): Promise<void> | undefined {
    const changes = materialized ?? readChangesNow(tx);
    if (changes === null) return readChanges(tx).then((read) => handleTransaction(tx, read, gate));
    return registerAndQueue(tx, withChanges(tx, changes), handleUnit, gate);
  }

  return {
    handleUnit,
    mapUnit: mapOne,
    handleTransaction,
    handleHeartbeat(tx) {
      stats.heartbeats += 1;
      const { checkpoint, systemId } = tx.position;
      const seq = coordinator.received(tx.endLsn, { tx: null, commitLsn: tx.commitLsn, xid: tx.xid, checkpoint, systemId, commitTime: tx.commitTime });
      const advanced = coordinator.complete(seq);
      if (advanced) deps.checkpoints.advance({ ...advanced.payload, endLsn: advanced.endLsn });
      return undefined;
    },
    async handleLargeTransaction(tx, sequence, gate) {
      await registerAndQueue(tx, withChanges(tx, sequence), large.mapLarge, gate);
    },
  };
}
