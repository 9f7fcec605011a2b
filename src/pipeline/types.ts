/**
 * The pipeline's shared types: what `createAssembler` takes and gives (its deps, status, run
 * summary), and what its steps pass each other. No logic here.
 */
import type { PostgresSource, SlotHolder, SourceStatus } from '../source/index.js';
import type { Sink, SinkMode, SinkStatus } from '../sink/index.js';
import type { SnapshotDecision, SnapshotProgress } from '../source/snapshot/index.js';
import type { Lsn, SourceTransaction } from '../source/types.js';
import type { ObservabilityAddress } from '../observability/address.js';
import type { Logger } from './logger.js';

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

/**
 * Whether this process streams the slot: `leader` from its first streaming session on (also while
 * it reconnects to it), `standby` while another process streams it (docs/running.md, "Running a
 * standby"), `starting` before either is known.
 */
export type AssemblerRole = 'starting' | 'standby' | 'leader';

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

/** What an operator needs to act on a parked record: what failed, where, and why (no row data). */
export interface FailedRecordSummary {
  readonly kind: string;
  readonly mapper: string;
  /** The failed-records stream and the record's id in it. */
  readonly stream: string;
  readonly id: string;
  readonly commitLsn: string | null;
  readonly xid: string | null;
  /** The cause's name and message (MapperFailed), or the contract's violations (ContractViolation). */
  readonly diagnosis: string;
}

export interface AssemblerStatus {
  readonly name: string;
  readonly state: AssemblerState;
  readonly role: AssemblerRole;
  /** While a standby: who streams the slot (walsender pid, client address). `null` otherwise. */
  readonly slotHolder: Pick<SlotHolder, 'pid' | 'client' | 'applicationName'> | null;
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
    /** Heartbeat transactions received (observability's freshness probe; not in `received`). */
    readonly heartbeats: number;
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
  /** Failed records parked by this run, by mapper and kind (`MapperFailed`, `ContractViolation`), and when the latest was. */
  readonly failed: { readonly byMapper: Readonly<Record<string, Readonly<Record<string, number>>>>; readonly lastAt: string | null; readonly latest: FailedRecordSummary | null };
  /** What freshness and lag in seconds are computed from (commit times on the source's clock). */
  readonly freshness: {
    /** Commit time of the last transaction of the durable prefix (`null`: none durable yet in this run). */
    readonly newestDurableCommitTime: string | null;
    /** Commit time of the oldest received transaction not yet durable (`null`: none waiting). */
    readonly oldestPendingCommitTime: string | null;
  };
  /** The checkpoint stream as this run wrote it. */
  readonly checkpoint: {
    /** Highest position recorded in `event-assembler.checkpoint-<name>`. */
    readonly recordedLsn: Lsn | null;
    /** When this run last recorded a checkpoint (`null`: not yet). */
    readonly recordedAt: string | null;
  };
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
  /**
   * Where the observability listener is bound (`config.observability`), once it is — `null`
   * before `run()` has bound it, after the run ended, or without an `observability` section.
   */
  observability(): ObservabilityAddress | null;
}

/** What the checkpoint coordinator carries per transaction: enough to write its checkpoint record. */
export interface TxPayload {
  readonly tx: SourceTransaction | null;
  readonly commitLsn: Lsn;
  readonly xid: number;
  readonly checkpoint: string;
  readonly systemId: string;
  /** Commit time (ISO) of the transaction; absent for positions that are no transaction (idle, consistent point). */
  readonly commitTime?: string;
}
