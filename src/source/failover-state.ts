/**
 * Whether the slot survives a failover of the primary (PostgreSQL 17 failover slots): its
 * `failover` flag on the primary, the primary's `synchronized_standby_slots`, and — for each
 * other host of a multi-host connection (the standbys the assembler would fail over to) —
 * whether the slot is synchronized there (`pg_replication_slots.synced`, not `temporary`).
 * Cheap: a few catalog reads, asked by `status` and at start-up / after a failover, never on the
 * hot path.
 */
import type pg from 'pg';
import { connectSource } from './connect-source.js';
import { parseSourceHosts } from './multi-host.js';

export interface StandbySlotState {
  /** `host:port` of the standby (another host of the connection string). */
  readonly server: string;
  /** `null`: the host did not answer (`error` says why). */
  readonly inRecovery: boolean | null;
  /** The slot exists there as a synchronized slot (`synced`), and is persistent (not `temporary`). */
  readonly synced: boolean;
  readonly confirmedFlushLsn: string | null;
  readonly error?: string;
}

export interface SlotFailoverState {
  /** The primary has failover slots (PostgreSQL 17+). */
  readonly supported: boolean;
  /** The slot's `failover` flag (`null`: no such slot, or not supported). */
  readonly failover: boolean | null;
  /** The primary's `synchronized_standby_slots` (`''`: none; `null`: not supported). */
  readonly synchronizedStandbySlots: string | null;
  /** The other hosts of the connection (standbys), each with the slot's state there. */
  readonly standbys: readonly StandbySlotState[];
  /** Failover keeps capture: failover = true, a synchronized standby slot set, and every known standby has the slot synced. */
  readonly safe: boolean;
  /** One line for logs and `status`. */
  readonly summary: string;
}

type Queryable = Pick<pg.Client, 'query'>;

/** Whether the server has failover slots (PostgreSQL 17+). */
export async function supportsFailoverSlots(client: Queryable): Promise<boolean> {
  const { rows } = await client.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
  return Number(rows[0]?.v ?? 0) >= 170_000;
}

async function readStandby(config: pg.ClientConfig, server: string, slot: string): Promise<StandbySlotState> {
  try {
    const client = await connectSource(config, { extra: { connectionTimeoutMillis: 3_000, query_timeout: 3_000, application_name: 'event-assembler failover check' } });
    try {
      const { rows } = await client.query<{ r: boolean; synced: boolean | null; temporary: boolean | null; lsn: string | null }>(
        `SELECT pg_catalog.pg_is_in_recovery() AS r, s.synced, s.temporary, s.confirmed_flush_lsn::text AS lsn
           FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1`,
        [slot],
      );
      const row = rows[0];
      return { server, inRecovery: row?.r ?? null, synced: row?.synced === true && row.temporary !== true, confirmedFlushLsn: row?.lsn ?? null };
    } finally {
      await client.end().catch(() => undefined);
    }
  } catch (error) {
    return { server, inRecovery: null, synced: false, confirmedFlushLsn: null, error: error instanceof Error ? error.message : String(error) };
  }
}

function describe(state: Omit<SlotFailoverState, 'summary' | 'safe'>, safe: boolean): string {
  if (!state.supported) return 'not failover-safe: this PostgreSQL has no failover slots (17+ needed); after a failover the slot is gone (REBUILD_NEEDED)';
  const standbys = state.standbys.map((s) =>
    s.inRecovery === null ? `${s.server} unreachable` : !s.inRecovery ? `${s.server} is not a standby` : s.synced ? `synced on ${s.server} (confirmed_flush_lsn ${s.confirmedFlushLsn})` : `NOT synced on ${s.server}`,
  );
  const parts = [
    `failover = ${state.failover === null ? 'unknown (no slot)' : String(state.failover)}`,
    `synchronized_standby_slots = '${state.synchronizedStandbySlots ?? ''}'`,
    ...standbys,
  ];
  return `${safe ? 'failover-safe' : 'not failover-safe'}: ${parts.join(', ')}`;
}

/**
 * The slot's failover state, read on `client` (a connection to the primary) and on the other
 * hosts of `connection` (each asked directly, no host walk; an unreachable one is reported, not thrown).
 */
export async function readFailoverState(client: Queryable, slot: string, connection: string | pg.ClientConfig | null, primary: string | null): Promise<SlotFailoverState> {
  const supported = await supportsFailoverSlots(client);
  let failover: boolean | null = null;
  let synchronizedStandbySlots: string | null = null;
  const standbys: StandbySlotState[] = [];
  if (supported) {
    const { rows } = await client.query<{ failover: boolean | null; sss: string }>(
      `SELECT (SELECT failover FROM pg_catalog.pg_replication_slots WHERE slot_name = $1) AS failover, current_setting('synchronized_standby_slots') AS sss`,
      [slot],
    );
    failover = rows[0]?.failover ?? null;
    synchronizedStandbySlots = rows[0]?.sss ?? '';
    if (connection !== null) {
      const target = parseSourceHosts(connection);
      const others = target.hosts.map((h, i) => ({ server: `${h.host}:${h.port}`, config: target.configs[i]! })).filter((h) => h.server !== primary);
      if (target.hosts.length > 1) standbys.push(...(await Promise.all(others.map((h) => readStandby(h.config, h.server, slot)))));
    }
  }
  const safe = supported && failover === true && Boolean(synchronizedStandbySlots) && standbys.every((s) => s.synced);
  const base = { supported, failover, synchronizedStandbySlots, standbys };
  return { ...base, safe, summary: describe(base, safe) };
}
