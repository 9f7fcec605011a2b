/**
 * Who streams a slot: `pg_replication_slots.active_pid` joined with `pg_stat_activity` for the
 * walsender's client address and application name. Works on a plain connection and on a logical
 * replication connection (which accepts SQL). A role sees another session's client address only
 * for sessions of the same role (or with `pg_read_all_stats`): the assemblers of one
 * configuration share the capture role, so they see each other.
 */
import type pg from 'pg';
import type { SlotHolder } from './errors.js';
import { quoteLiteral } from './wire.js';

interface HolderRow {
  active_pid: number | null;
  client_addr: string | null;
  client_port: number | null;
  application_name: string | null;
  visible: boolean;
}

/** `client_addr:client_port`, `local socket` (port -1), or `null` when the row is not visible to this role. */
function clientOf(row: HolderRow): string | null {
  if (!row.visible) return null;
  if (row.client_addr) {
    const host = row.client_addr.includes(':') ? `[${row.client_addr}]` : row.client_addr; // IPv6
    return row.client_port !== null && row.client_port >= 0 ? `${host}:${row.client_port}` : row.client_addr;
  }
  return row.client_port === -1 ? 'local socket' : null;
}

/** The slot's holder, or `null` when the slot is free (or does not exist). */
export async function querySlotHolder(client: Pick<pg.Client, 'query'>, slot: string, isOwn: (pid: number) => boolean = () => false): Promise<SlotHolder | null> {
  const { rows } = await client.query<HolderRow>(
    `SELECT s.active_pid, host(a.client_addr) AS client_addr, a.client_port, NULLIF(a.application_name, '') AS application_name, a.pid IS NOT NULL AS visible
       FROM pg_catalog.pg_replication_slots s LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = s.active_pid
      WHERE s.slot_name = ${quoteLiteral(slot)} AND s.active_pid IS NOT NULL`,
  );
  const row = rows[0];
  if (!row || row.active_pid === null) return null;
  const pid = Number(row.active_pid);
  return { pid, client: clientOf(row), applicationName: row.visible ? row.application_name : null, ours: isOwn(pid) };
}

/** `pid 4711 on 10.0.0.5:53422 (event-assembler)`: for log lines. */
export function describeSlotHolder(holder: Pick<SlotHolder, 'pid' | 'client' | 'applicationName'>): string {
  return `pid ${holder.pid} on ${holder.client ?? 'an unknown client (not visible to this role)'}${holder.applicationName ? ` (${holder.applicationName})` : ''}`;
}
