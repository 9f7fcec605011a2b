/**
 * Teardown of a decommissioned assembler's source objects: its logical replication slot (a slot
 * nobody reads pins WAL forever) and, when asked, its publication(s). The inverse of setup.ts.
 *
 * `inspectTeardown` only reads (`pg_replication_slots`, `pg_publication`); `teardownCapture`
 * drops. A slot another process streams from is never dropped: PostgreSQL would refuse anyway
 * (`is active for PID n`), and an active slot means an assembler still runs — stop it first.
 */
import pg from 'pg';
import { EventAssemblerError } from '../errors.js';
import { quoteIdent } from './checks.js';
import { connectSource } from './connect-source.js';

export type TeardownErrorCode = 'TEARDOWN_SLOT_ACTIVE' | 'TEARDOWN_SLOT_NOT_OURS' | 'TEARDOWN_NOT_PERMITTED';

/** Teardown refused or failed; `details.fix` says what to do. */
export class TeardownError extends EventAssemblerError {
  declare readonly code: TeardownErrorCode;
  constructor(code: TeardownErrorCode, message: string, details: Readonly<Record<string, unknown>> & { readonly fix: string }) {
    super(code, `${message}\n  fix: ${details.fix}`, details);
  }
}

export interface TeardownSlotState {
  readonly name: string;
  readonly exists: boolean;
  readonly active: boolean;
  /** The walsender streaming the slot, when active. */
  readonly activePid: number | null;
  /** Who that is, from pg_stat_replication (visible to the same role or a superuser). */
  readonly client: { readonly applicationName: string | null; readonly address: string | null; readonly user: string | null } | null;
  readonly walStatus: string | null;
  /** `pg_current_wal_lsn() − restart_lsn` in bytes (a decimal string), `null` when unknown. */
  readonly retainedBytes: string | null;
  readonly restartLsn: string | null;
  readonly confirmedFlushLsn: string | null;
  /** Why it is not ours, when it is a physical slot, another plugin's, or another database's. */
  readonly foreign: string | null;
}

export interface TeardownPublicationState {
  readonly name: string;
  readonly exists: boolean;
  /** The connected role may drop it (owns it, or is a superuser). */
  readonly droppable: boolean;
  readonly owner: string | null;
}

export interface TeardownPlan {
  readonly database: string;
  readonly role: string;
  readonly slot: TeardownSlotState;
  readonly publications: readonly TeardownPublicationState[];
  /** Whether the publications are to be dropped too. */
  readonly dropPublication: boolean;
}

export interface TeardownOptions {
  /** A role that may drop the slot (REPLICATION, e.g. the capture role) — and own the publications to drop them. */
  readonly connection: string | pg.ClientConfig;
  readonly slot: string;
  readonly publications: readonly string[];
  /** Drop the publications too. Default: false (other assemblers may publish from them). */
  readonly dropPublication?: boolean;
}

export interface TeardownReport {
  readonly plan: TeardownPlan;
  /** Statements executed, in order. */
  readonly executed: readonly string[];
  readonly slotDropped: boolean;
  readonly publicationsDropped: readonly string[];
}

async function withClient<T>(connection: string | pg.ClientConfig, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connectSource(connection);
  try {
    return await run(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

interface SlotRow {
  slot_type: string;
  plugin: string | null;
  database: string | null;
  active: boolean;
  active_pid: number | null;
  wal_status: string | null;
  retained: string | null;
  restart_lsn: string | null;
  confirmed_flush_lsn: string | null;
  application_name: string | null;
  client_addr: string | null;
  usename: string | null;
}

async function slotState(client: pg.Client, name: string, database: string): Promise<TeardownSlotState> {
  const { rows } = await client.query<SlotRow>(
    `SELECT s.slot_type, s.plugin, s.database, s.active, s.active_pid, s.wal_status,
            (pg_current_wal_lsn() - s.restart_lsn)::text AS retained, s.restart_lsn::text AS restart_lsn,
            s.confirmed_flush_lsn::text AS confirmed_flush_lsn, r.application_name, r.client_addr::text AS client_addr, r.usename::text AS usename
       FROM pg_catalog.pg_replication_slots s LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid
      WHERE s.slot_name = $1`,
    [name],
  );
  const row = rows[0];
  if (!row) return { name, exists: false, active: false, activePid: null, client: null, walStatus: null, retainedBytes: null, restartLsn: null, confirmedFlushLsn: null, foreign: null };
  const foreign =
    row.slot_type !== 'logical' ? `it is a ${row.slot_type} slot` : row.plugin !== 'pgoutput' ? `it uses the output plugin ${row.plugin ?? '?'}, not pgoutput` : row.database !== database ? `it belongs to database ${row.database ?? '?'}, not ${database}` : null;
  return {
    name,
    exists: true,
    active: row.active,
    activePid: row.active_pid,
    client: row.active_pid !== null && (row.application_name !== null || row.client_addr !== null) ? { applicationName: row.application_name, address: row.client_addr, user: row.usename } : null,
    walStatus: row.wal_status,
    retainedBytes: row.retained === null ? null : row.retained.replace(/\.0*$/, ''),
    restartLsn: row.restart_lsn,
    confirmedFlushLsn: row.confirmed_flush_lsn,
    foreign,
  };
}

async function readPlan(client: pg.Client, options: TeardownOptions): Promise<TeardownPlan> {
  const { rows } = await client.query<{ database: string; role: string }>('SELECT current_database() AS database, current_user AS role');
  const { database, role } = rows[0]!;
  const publications: TeardownPublicationState[] = [];
  for (const name of options.publications) {
    const pub = await client.query<{ owner: string; droppable: boolean }>(
      `SELECT pg_get_userbyid(pubowner) AS owner, pg_has_role(current_user, pubowner, 'USAGE') AS droppable FROM pg_catalog.pg_publication WHERE pubname = $1`,
      [name],
    );
    const found = pub.rows[0];
    publications.push({ name, exists: found !== undefined, droppable: found?.droppable ?? false, owner: found?.owner ?? null });
  }
  return { database, role, slot: await slotState(client, options.slot, database), publications, dropPublication: options.dropPublication === true };
}

/** What teardown would drop, and whether it may: reads only. Throws the refusal `teardownCapture` would throw. */
export async function inspectTeardown(options: TeardownOptions): Promise<TeardownPlan> {
  return withClient(options.connection, async (client) => {
    const plan = await readPlan(client, options);
    refuse(plan);
    return plan;
  });
}

function activeError(slot: string, pid: number | null, who: TeardownSlotState['client']): TeardownError {
  const client = who ? ` (${[who.applicationName && `application ${who.applicationName}`, who.address && `from ${who.address}`, who.user && `as ${who.user}`].filter(Boolean).join(', ')})` : '';
  return new TeardownError('TEARDOWN_SLOT_ACTIVE', `replication slot "${slot}" is active for PID ${pid ?? '?'}${client}: an assembler (or another client) still streams from it`, {
    slot,
    activePid: pid,
    fix: `stop every process of this assembler — the leader and its standbys — then run teardown again; to end a client you cannot stop: SELECT pg_terminate_backend(${pid ?? '<pid>'});`,
  });
}

/** The refusals, before anything is dropped. */
function refuse(plan: TeardownPlan): void {
  const { slot } = plan;
  if (slot.exists && slot.foreign) {
    throw new TeardownError('TEARDOWN_SLOT_NOT_OURS', `replication slot "${slot.name}" is not this assembler's: ${slot.foreign}`, {
      slot: slot.name,
      fix: `check source.slot in the configuration and the connection's database; drop the slot by hand if it really is to go: SELECT pg_drop_replication_slot('${slot.name}');`,
    });
  }
  if (slot.exists && slot.active) throw activeError(slot.name, slot.activePid, slot.client);
  if (!plan.dropPublication) return;
  const notOwned = plan.publications.filter((p) => p.exists && !p.droppable);
  if (notOwned.length > 0) {
    throw new TeardownError(
      'TEARDOWN_NOT_PERMITTED',
      `role ${plan.role} may not drop publication ${notOwned.map((p) => `"${p.name}" (owned by ${p.owner ?? '?'})`).join(', ')}: only its owner or a superuser may; nothing was dropped`,
      { publications: notOwned.map((p) => p.name), fix: `run teardown with --source <connection of the publication's owner> (as setup ran), or leave out --drop-publication` },
    );
  }
}

function translate(error: unknown, slot: string): unknown {
  const pgError = error as { code?: string; message?: string };
  if (pgError.code === '55006') {
    const pid = /PID (\d+)/.exec(pgError.message ?? '')?.[1];
    return activeError(slot, pid ? Number(pid) : null, null);
  }
  if (pgError.code === '42501') {
    return new TeardownError('TEARDOWN_NOT_PERMITTED', `not permitted: ${pgError.message ?? 'insufficient privilege'}`, { slot, fix: 'connect as a role with REPLICATION (the capture role) to drop the slot, and as the owner to drop a publication (--source)' });
  }
  return error;
}

/**
 * Drops the slot (when it exists) and, with `dropPublication`, the publications (when they
 * exist). Idempotent: what is gone already is reported, not an error. Refuses — dropping
 * nothing — while the slot is active, when it is not this assembler's kind of slot, or when the
 * role may not drop a publication it was asked to drop.
 */
export async function teardownCapture(options: TeardownOptions): Promise<TeardownReport> {
  return withClient(options.connection, async (client) => {
    const plan = await readPlan(client, options);
    refuse(plan);
    const executed: string[] = [];
    let slotDropped = false;
    if (plan.slot.exists) {
      const sql = 'SELECT pg_drop_replication_slot($1)';
      try {
        await client.query(sql, [options.slot]);
      } catch (error) {
        throw translate(error, options.slot);
      }
      executed.push(`SELECT pg_drop_replication_slot('${options.slot}');`);
      slotDropped = true;
    }
    const publicationsDropped: string[] = [];
    if (plan.dropPublication) {
      for (const p of plan.publications.filter((x) => x.exists)) {
        const sql = `DROP PUBLICATION ${quoteIdent(p.name)}`;
        try {
          await client.query(sql);
        } catch (error) {
          throw translate(error, options.slot);
        }
        executed.push(`${sql};`);
        publicationsDropped.push(p.name);
      }
    }
    return { plan, executed, slotDropped, publicationsDropped };
  });
}
