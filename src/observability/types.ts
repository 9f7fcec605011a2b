/**
 * The shapes observability serves. `StatusDocument` is `/status.json` — the same signals as
 * `/metrics`, for the status page and for scripts; its fields are documented in docs/operations.md.
 * No logic here.
 */
import type { AssemblerState, FailedRecordSummary } from '../pipeline/types.js';
import type { Lsn } from '../source/types.js';
import type { HeartbeatStatus } from './heartbeat.js';
import type { SlotReading } from './slot-reading.js';

export type { ObservabilityAddress } from './address.js';
export type { HeartbeatStatus } from './heartbeat.js';
export type { SlotDecodingStats, SlotReading, WalStatus } from './slot-reading.js';

export interface SnapshotTableSignal {
  readonly table: string;
  readonly status: 'pending' | 'running' | 'done';
  /** Rows read (and durable) so far in this generation. */
  readonly rows: number;
  /** `pg_class.reltuples` when the table started (`null`: never analyzed). */
  readonly estimatedRows: number | null;
  /** Rows per second over the last 30 s of readings (`null`: not enough readings). */
  readonly rowsPerSecond: number | null;
}

export interface StatusDocument {
  readonly version: 1;
  readonly name: string;
  /** When the document was made (ISO). */
  readonly at: string;
  readonly state: AssemblerState;
  /** `leader`: streams the slot; `standby`: does not (starting, waiting, reconnecting, stopped). */
  readonly role: 'leader' | 'standby';
  /** `/healthz`: the process is alive and its pipeline has not failed or stopped. */
  readonly health: { readonly ok: boolean; readonly reason: string | null };
  /** `/readyz`: streaming (leader, source connected, destination up) and fresh enough; `reasons` when not. */
  readonly ready: { readonly ok: boolean; readonly reasons: readonly string[] };
  readonly source: { readonly connected: boolean; readonly state: string | null; readonly reconnects: number; readonly paused: boolean; readonly lastError: string | null };
  readonly destination: { readonly up: boolean; readonly state: string | null; readonly mode: string | null; readonly retries: number; readonly lastError: string | null };
  /** received: highest WAL position read from the slot; durable: end of the durable prefix; acknowledged: what the slot was told. */
  readonly positions: { readonly receivedLsn: Lsn | null; readonly durableLsn: Lsn | null; readonly acknowledgedLsn: Lsn | null };
  /** The slot as PostgreSQL reports it (`null`: the reading failed — see `slotError`). */
  readonly slot: SlotReading | null;
  readonly slotError: string | null;
  readonly lag: {
    /** The server's current WAL position − the slot's confirmed_flush_lsn (`null`: no reading). */
    readonly bytes: number | null;
    /** Seconds the oldest received, not yet durable transaction has waited since its commit (0: none waiting). */
    readonly seconds: number | null;
  };
  readonly freshness: {
    /** Seconds since the newest durable source commit (a heartbeat on an idle database); `null`: none yet. */
    readonly seconds: number | null;
    /** `/readyz` limit (observability.maxFreshnessMs). */
    readonly maxSeconds: number;
    readonly newestDurableCommitTime: string | null;
  };
  readonly heartbeat: HeartbeatStatus & { readonly received: number };
  readonly checkpoint: { readonly recordedLsn: Lsn | null; readonly recordedAt: string | null; readonly ageSeconds: number | null };
  /** Cumulative counts of this run (rates: the difference between two documents). */
  readonly throughput: {
    readonly transactionsReceived: number;
    readonly transactionsAppended: number;
    readonly transactionsSkipped: number;
    readonly eventsAppended: number;
    readonly eventsReplaySkipped: number;
  };
  readonly failed: {
    /** Parked records by kind (`MapperFailed`, `ContractViolation`). */
    readonly total: Readonly<Record<string, number>>;
    readonly byMapper: Readonly<Record<string, Readonly<Record<string, number>>>>;
    readonly lastAt: string | null;
    /** The latest parked record: kind, mapper, where it is (stream, id), its source transaction, one line of why. */
    readonly latest: FailedRecordSummary | null;
  };
  readonly snapshot: { readonly generation: string | null; readonly action: string; readonly finished: boolean; readonly tables: readonly SnapshotTableSignal[] } | null;
  readonly buffer: { readonly memoryBytes: number; readonly spilledBytes: number; readonly spilledTransactions: number; readonly inFlightTransactions: number; readonly inFlightBytes: number };
  readonly appends: { readonly calls: number; readonly unitsPerCall: number | null; readonly retries: number };
}
