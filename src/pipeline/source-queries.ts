/**
 * The pipeline's own questions to PostgreSQL at start-up and for snapshots, each on a short-lived
 * connection: the system identity, the slot's state, and dropping a slot that must be re-created.
 * (The capture itself — the replication session — is `source/`.)
 */
import pg from 'pg';
import type { Lsn } from '../source/types.js';
import { connectSource } from '../source/connect-source.js';
import { readFailoverState, type SlotFailoverState } from '../source/failover-state.js';

export interface SlotState {
  readonly exists: boolean;
  readonly walStatus: string | null;
  readonly confirmedFlushLsn: Lsn | null;
  readonly active: boolean;
}

/** The slot as the checkpoint check needs it, with the server's system identifier ('' when not granted). */
export interface SlotCheckRow {
  readonly confirmed_flush_lsn: string | null;
  readonly wal_status: string | null;
  readonly system_identifier: string;
}

/** Runs `use` on a new connection, closed afterwards whatever happens. */
export async function withClient<T>(connection: string, use: (client: pg.Client) => Promise<T>, options: { replication?: boolean } = {}): Promise<T> {
  const client = await connectSource(connection, options.replication ? { extra: { replication: 'database' } } : {});
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export function identifySystem(connection: string): Promise<{ systemId: string; timeline: number }> {
  return withClient(
    connection,
    async (client) => {
      const r = await client.query<{ systemid: string; timeline: string | number }>('IDENTIFY_SYSTEM');
      return { systemId: String(r.rows[0]!.systemid), timeline: Number(r.rows[0]!.timeline) };
    },
    { replication: true },
  );
}

export function slotState(connection: string, slot: string): Promise<SlotState> {
  return withClient(connection, async (client) => {
    const { rows } = await client.query<{ confirmed_flush_lsn: string | null; wal_status: string | null; active: boolean }>(
      'SELECT confirmed_flush_lsn::text AS confirmed_flush_lsn, wal_status, active FROM pg_catalog.pg_replication_slots WHERE slot_name = $1',
      [slot],
    );
    const row = rows[0];
    return row ? { exists: true, walStatus: row.wal_status, confirmedFlushLsn: row.confirmed_flush_lsn, active: row.active } : { exists: false, walStatus: null, confirmedFlushLsn: null, active: false };
  });
}

/** The slot's row for the checkpoint check, or `null` when it does not exist. */
export function slotCheckRow(connection: string, slot: string): Promise<SlotCheckRow | null> {
  return withClient(connection, async (client) => {
    const { rows } = await client
      .query<SlotCheckRow>(
        `SELECT s.confirmed_flush_lsn::text AS confirmed_flush_lsn, s.wal_status, (SELECT system_identifier::text FROM pg_control_system()) AS system_identifier
           FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = $1`,
        [slot],
      )
      .catch(async () =>
        // pg_control_system() may not be granted: the comparison then assumes the same system.
        client.query<SlotCheckRow>(`SELECT confirmed_flush_lsn::text AS confirmed_flush_lsn, wal_status, '' AS system_identifier FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, [slot]),
      );
    return rows[0] ?? null;
  });
}

export function dropSlot(connection: string, slot: string): Promise<void> {
  return withClient(connection, async (client) => {
    await client.query('SELECT pg_catalog.pg_drop_replication_slot($1)', [slot]);
  });
}

/** The slot's failover state (failover flag, synchronized_standby_slots, synced on the other hosts), read from the primary the host walk takes. */
export function failoverState(connection: string, slot: string): Promise<SlotFailoverState> {
  return withClient(connection, (client) => readFailoverState(client, slot, connection, `${client.host}:${client.port}`));
}
