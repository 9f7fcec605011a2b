/**
 * One-time source setup: the publication (exactly the captured tables) and the logical
 * replication slot (pgoutput), plus the SQL of a least-privilege capture role.
 *
 * Setup runs as an administrator (owner of the tables, or superuser): creating a
 * publication needs ownership of its tables. Capture itself then runs as the role from
 * {@link captureRoleSql}, which needs only LOGIN, REPLICATION and SELECT.
 */
import pg from 'pg';
import { checkSlot, parseQualifiedTable, quoteIdent, quoteLiteral, SourceCheckError, tableSql } from './checks.js';
import type { Lsn, QualifiedTable } from './types.js';
import { connectSource } from './connect-source.js';
import { readFailoverState, supportsFailoverSlots } from './failover-state.js';

export interface SetupCaptureOptions {
  /** Administrator connection: a connection string or `pg` settings. */
  readonly connection: string | pg.ClientConfig;
  readonly publication: string;
  readonly slot: string;
  /** `schema.table` names; the publication will contain exactly these. */
  readonly tables: readonly QualifiedTable[];
  /**
   * When the publication exists with other tables: `true` changes it (`ALTER PUBLICATION … SET TABLE`),
   * `false` fails and prints that statement. Default: false (another assembler may use it).
   */
  readonly updatePublication?: boolean;
  /** Create the slot when missing. Default: true. */
  readonly createSlot?: boolean;
  /**
   * Create the slot as a failover slot (`failover = true`), so a standby with
   * `sync_replication_slots = on` keeps a synchronized copy and capture survives a failover.
   * Default: true where the server supports it (PostgreSQL 17+); ignored on older servers.
   */
  readonly failover?: boolean;
}

export interface SetupCaptureReport {
  readonly publication: { readonly name: string; readonly action: 'created' | 'unchanged' | 'updated'; readonly tables: readonly QualifiedTable[] };
  readonly slot: { readonly name: string; readonly action: 'created' | 'exists' | 'missing'; readonly lsn: Lsn | null; readonly failover: boolean | null };
  /** Statements that were executed, in order. */
  readonly executed: readonly string[];
  /** One human-readable line per thing done or found. */
  readonly lines: readonly string[];
}

export function createPublicationSql(publication: string, tables: readonly QualifiedTable[]): string {
  return `CREATE PUBLICATION ${quoteIdent(publication)} FOR TABLE ${tables.map(tableSql).join(', ')} WITH (publish = 'insert, update, delete, truncate');`;
}

export function alterPublicationSql(publication: string, tables: readonly QualifiedTable[]): string {
  return `ALTER PUBLICATION ${quoteIdent(publication)} SET TABLE ${tables.map(tableSql).join(', ')};`;
}

/**
 * The slot's creation; `failover` (PostgreSQL 17+: the 5th argument) makes it a failover slot,
 * synchronized to standbys that run with `sync_replication_slots = on` (docs/failover.md).
 */
export function createSlotSql(slot: string, failover = false): string {
  return failover
    ? `SELECT lsn FROM pg_create_logical_replication_slot(${quoteLiteral(slot)}, 'pgoutput', false, false, true);`
    : `SELECT lsn FROM pg_create_logical_replication_slot(${quoteLiteral(slot)}, 'pgoutput');`;
}

/** The statements setup runs on a database that has neither the publication nor the slot (PostgreSQL 17+: a failover slot). */
export function setupSql(options: Pick<SetupCaptureOptions, 'publication' | 'slot' | 'tables' | 'failover'>): string[] {
  return [createPublicationSql(options.publication, options.tables), createSlotSql(options.slot, options.failover !== false)];
}

export interface CaptureRoleOptions {
  readonly role: string;
  readonly tables: readonly QualifiedTable[];
  /** Database to grant CONNECT on. Default: none (the statement is left out). */
  readonly database?: string;
  /** Password to set. Default: a placeholder to replace (`PASSWORD '<password>'`). */
  readonly password?: string;
}

/**
 * SQL for a least-privilege capture role: it can log in, stream from a slot (REPLICATION),
 * and read the captured tables (SELECT, for snapshots). Nothing else: no ownership, no
 * superuser, no write access.
 */
export function captureRoleSql(options: CaptureRoleOptions): string {
  const role = quoteIdent(options.role);
  const schemas = [...new Set(options.tables.map((t) => parseQualifiedTable(t).schema))].sort();
  const lines = [
    `-- Least-privilege capture role for event-assembler.`,
    `CREATE ROLE ${role} LOGIN REPLICATION PASSWORD ${options.password !== undefined ? quoteLiteral(options.password) : `'<password>'`};`,
    ...(options.database ? [`GRANT CONNECT ON DATABASE ${quoteIdent(options.database)} TO ${role};`] : []),
    ...schemas.map((s) => `GRANT USAGE ON SCHEMA ${quoteIdent(s)} TO ${role};`),
    `GRANT SELECT ON TABLE ${options.tables.map(tableSql).join(', ')} TO ${role};`,
    `-- Streaming needs only REPLICATION: the slot and publication are created by setup (as the tables' owner),`,
    `-- and pgoutput filters by the publication, not by the role's privileges.`,
    `-- Snapshots read the tables with SELECT inside the slot's exported snapshot (SET TRANSACTION SNAPSHOT needs no grant).`,
    `-- Watermarks for incremental snapshots and freshness heartbeats (observability) are written with pg_logical_emit_message(), which PostgreSQL 17 lets PUBLIC execute;`,
    `-- if your server revoked it, also run: GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text, boolean) TO ${role};`,
    `-- Start-up checks and slot metrics read pg_catalog (pg_class, pg_index, pg_publication_tables, pg_replication_slots, pg_stat_replication_slots): readable by PUBLIC.`,
  ];
  return lines.join('\n');
}

/**
 * Creates (or checks) the publication for exactly `tables` and the logical slot, then
 * reports what it did. Idempotent: a second run reports `unchanged`/`exists`.
 */
export async function setupCapture(options: SetupCaptureOptions): Promise<SetupCaptureReport> {
  if (options.tables.length === 0) throw new RangeError('setup needs at least one table');
  for (const t of options.tables) parseQualifiedTable(t);
  const client = await connectSource(options.connection);
  const executed: string[] = [];
  const lines: string[] = [];
  try {
    // Tables must exist before the publication can name them.
    for (const table of options.tables) {
      const { schema, name } = parseQualifiedTable(table);
      const found = await client.query(
        `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
        [schema, name],
      );
      if (found.rowCount === 0) {
        throw new SourceCheckError('SOURCE_TABLE_MISSING', `table ${table} does not exist in this database`, { table, fix: `create ${tableSql(table)} first, or remove it from --tables` });
      }
    }

    let publicationAction: SetupCaptureReport['publication']['action'];
    const pub = await client.query('SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = $1', [options.publication]);
    if (pub.rowCount === 0) {
      const sql = createPublicationSql(options.publication, options.tables);
      await client.query(sql);
      executed.push(sql);
      publicationAction = 'created';
      lines.push(`publication ${options.publication}: created for ${options.tables.join(', ')}`);
    } else {
      const members = await client.query('SELECT schemaname::text || \'.\' || tablename::text AS t FROM pg_catalog.pg_publication_tables WHERE pubname = $1', [options.publication]);
      const present = new Set((members.rows as { t: string }[]).map((r) => r.t));
      const wanted = new Set(options.tables);
      const same = !(pub.rows[0] as { puballtables: boolean }).puballtables && present.size === wanted.size && [...wanted].every((t) => present.has(t));
      if (same) {
        publicationAction = 'unchanged';
        lines.push(`publication ${options.publication}: exists with exactly the configured tables`);
      } else {
        const fix = (pub.rows[0] as { puballtables: boolean }).puballtables
          ? `DROP PUBLICATION ${quoteIdent(options.publication)}; ${createPublicationSql(options.publication, options.tables)}`
          : alterPublicationSql(options.publication, options.tables);
        if (!options.updatePublication || (pub.rows[0] as { puballtables: boolean }).puballtables) {
          throw new SourceCheckError(
            'SOURCE_PUBLICATION_MISMATCH',
            `publication ${options.publication} exists with other tables (${[...present].sort().join(', ') || 'none'}); expected exactly ${options.tables.join(', ')}` +
              (options.updatePublication ? '' : ' — rerun with --update-publication to change it'),
            { publication: options.publication, fix },
          );
        }
        await client.query(fix);
        executed.push(fix);
        publicationAction = 'updated';
        lines.push(`publication ${options.publication}: updated to ${options.tables.join(', ')} (was ${[...present].sort().join(', ') || 'empty'})`);
      }
    }

    let slotAction: SetupCaptureReport['slot']['action'];
    let slotLsn: Lsn | null = null;
    const supported = await supportsFailoverSlots(client);
    const failover = supported && options.failover !== false;
    const slot = await client.query('SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1', [options.slot]);
    if (slot.rowCount === 0) {
      if (options.createSlot === false) {
        slotAction = 'missing';
        lines.push(`slot ${options.slot}: missing (not created: createSlot is false)`);
      } else {
        const sql = createSlotSql(options.slot, failover);
        const created = await client.query(sql);
        executed.push(sql);
        slotLsn = (created.rows[0] as { lsn: string }).lsn;
        slotAction = 'created';
        lines.push(`slot ${options.slot}: created (pgoutput${failover ? ', failover = true' : ''}), streaming starts at ${slotLsn}`);
      }
    } else {
      const checked = await checkSlot(client, options.slot);
      slotAction = 'exists';
      slotLsn = checked.confirmedFlushLsn;
      lines.push(`slot ${options.slot}: exists (logical, pgoutput), confirmed_flush_lsn ${checked.confirmedFlushLsn ?? 'none'}, wal_status ${checked.walStatus ?? 'unknown'}`);
    }
    const state = supported ? await readFailoverState(client, options.slot, null, null) : null;
    if (slotAction !== 'missing') lines.push(`slot ${options.slot}: ${state ? state.summary : 'not failover-safe: this PostgreSQL has no failover slots (17+ needed)'}`);
    if (state && state.failover === false) {
      lines.push(`  to make it a failover slot (while no assembler streams it), on a replication connection: ALTER_REPLICATION_SLOT ${options.slot} (FAILOVER true)`);
    }
    if (state && state.failover && !state.synchronizedStandbySlots) {
      lines.push(`  set synchronized_standby_slots on the primary to the standby's physical slot, so the synchronized slot is never ahead of the standby (docs/failover.md)`);
    }
    return {
      publication: { name: options.publication, action: publicationAction, tables: [...options.tables] },
      slot: { name: options.slot, action: slotAction, lsn: slotLsn, failover: state?.failover ?? null },
      executed,
      lines,
    };
  } finally {
    await client.end().catch(() => {});
  }
}
