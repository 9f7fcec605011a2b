/**
 * The source side of the signals, read from PostgreSQL on an ordinary (non-replication)
 * connection: the slot's retention and state (`pg_replication_slots`), its decoding statistics
 * (`pg_stat_replication_slots`) and the server's current WAL position. One query; readable by
 * the capture role (both views and `pg_current_wal_lsn()` are granted to PUBLIC).
 */
import type pg from 'pg';
import type { Lsn } from '../source/types.js';

/** `pg_replication_slots.wal_status` values (PostgreSQL 13+). */
export const WAL_STATUSES = ['reserved', 'extended', 'unreserved', 'lost'] as const;
export type WalStatus = (typeof WAL_STATUSES)[number];

/** Cumulative decoding statistics of the slot (`pg_stat_replication_slots`); reset by `pg_stat_reset_replication_slot()`. */
export interface SlotDecodingStats {
  /** Transactions spilled to disk by the walsender's decoding (logical_decoding_work_mem exceeded). */
  readonly spillTxns: number;
  readonly spillCount: number;
  readonly spillBytes: number;
  /** In-progress transactions streamed to the assembler (protocol v2 streaming). */
  readonly streamTxns: number;
  readonly streamCount: number;
  readonly streamBytes: number;
  /** Transactions and bytes decoded and sent. */
  readonly totalTxns: number;
  readonly totalBytes: number;
  /** When these statistics were last reset (`null`: never). */
  readonly statsReset: string | null;
}

export interface SlotReading {
  /** When it was read (ISO). */
  readonly at: string;
  readonly slot: string;
  /** `false`: no slot of that name (then every other field is `null`). */
  readonly exists: boolean;
  /** The server's current WAL insert position. */
  readonly currentWalLsn: Lsn;
  readonly restartLsn: Lsn | null;
  readonly confirmedFlushLsn: Lsn | null;
  /** WAL the slot makes the server keep: current position − restart_lsn. */
  readonly retainedWalBytes: number | null;
  /** WAL not yet acknowledged by the assembler: current position − confirmed_flush_lsn. */
  readonly lagBytes: number | null;
  readonly walStatus: WalStatus | null;
  /** Bytes that can still be written before the slot is in danger of `lost` (`null`: max_slot_wal_keep_size = -1, unlimited). */
  readonly safeWalSizeBytes: number | null;
  readonly active: boolean | null;
  readonly activePid: number | null;
  readonly decoding: SlotDecodingStats | null;
}

interface SlotRow {
  current_lsn: string;
  restart_lsn: string | null;
  confirmed_flush_lsn: string | null;
  retained: string | null;
  lag: string | null;
  wal_status: string | null;
  safe_wal_size: string | null;
  active: boolean | null;
  active_pid: number | null;
  spill_txns: string | null;
  spill_count: string | null;
  spill_bytes: string | null;
  stream_txns: string | null;
  stream_count: string | null;
  stream_bytes: string | null;
  total_txns: string | null;
  total_bytes: string | null;
  stats_reset: Date | null;
}

const SLOT_SQL = `
SELECT pg_catalog.pg_current_wal_lsn()::text AS current_lsn,
       s.restart_lsn::text AS restart_lsn, s.confirmed_flush_lsn::text AS confirmed_flush_lsn,
       pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn)::text AS retained,
       pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)::text AS lag,
       s.wal_status, s.safe_wal_size::text AS safe_wal_size, s.active, s.active_pid,
       st.spill_txns::text, st.spill_count::text, st.spill_bytes::text,
       st.stream_txns::text, st.stream_count::text, st.stream_bytes::text,
       st.total_txns::text, st.total_bytes::text, st.stats_reset
  FROM (SELECT 1) one
  LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1
  LEFT JOIN pg_catalog.pg_stat_replication_slots st ON st.slot_name = s.slot_name`;

const num = (text: string | null): number | null => (text === null ? null : Number(text));

function decodingStats(row: SlotRow): SlotDecodingStats | null {
  if (row.total_txns === null) return null;
  return {
    spillTxns: num(row.spill_txns) ?? 0,
    spillCount: num(row.spill_count) ?? 0,
    spillBytes: num(row.spill_bytes) ?? 0,
    streamTxns: num(row.stream_txns) ?? 0,
    streamCount: num(row.stream_count) ?? 0,
    streamBytes: num(row.stream_bytes) ?? 0,
    totalTxns: num(row.total_txns) ?? 0,
    totalBytes: num(row.total_bytes) ?? 0,
    statsReset: row.stats_reset?.toISOString() ?? null,
  };
}

/** Reads the slot's signals in one query (bound it with the connection's `query_timeout`: a scrape must not hang). */
export async function readSlot(client: Pick<pg.Client, 'query'>, slot: string): Promise<SlotReading> {
  const { rows } = await client.query<SlotRow>(SLOT_SQL, [slot]);
  const row = rows[0]!;
  const exists = row.wal_status !== null || row.restart_lsn !== null || row.active !== null;
  const walStatus = (WAL_STATUSES as readonly string[]).includes(row.wal_status ?? '') ? (row.wal_status as WalStatus) : null;
  return {
    at: new Date().toISOString(),
    slot,
    exists,
    currentWalLsn: row.current_lsn,
    restartLsn: row.restart_lsn,
    confirmedFlushLsn: row.confirmed_flush_lsn,
    retainedWalBytes: num(row.retained),
    lagBytes: num(row.lag),
    walStatus,
    safeWalSizeBytes: num(row.safe_wal_size),
    active: row.active,
    activePid: row.active_pid,
    decoding: decodingStats(row),
  };
}
