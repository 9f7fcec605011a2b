/**
 * Start-up checks of the source: every problem found here would otherwise surface later as
 * missing data (no old values, no key) or as a silent resume from the wrong place. Each
 * failure names the object and the SQL that fixes it.
 */
import { EventAssemblerError } from '../errors.js';
import type { QualifiedTable, ReplicaIdentity } from './types.js';

export type SourceCheckCode =
  | 'SOURCE_TABLE_NAME_INVALID'
  | 'SOURCE_TABLE_MISSING'
  | 'SOURCE_TABLE_NO_KEY'
  | 'SOURCE_REPLICA_IDENTITY_NOTHING'
  | 'SOURCE_REPLICA_IDENTITY_INSUFFICIENT'
  | 'SOURCE_WAL_LEVEL'
  | 'SOURCE_ROLE_NOT_REPLICATION'
  | 'SOURCE_SLOT_MISSING'
  | 'SOURCE_SLOT_WRONG_KIND'
  | 'SOURCE_SLOT_WRONG_DATABASE'
  | 'SOURCE_SLOT_INVALIDATED'
  | 'SOURCE_PUBLICATION_MISSING'
  | 'SOURCE_PUBLICATION_MISMATCH';

export interface SourceCheckDetails {
  readonly table?: QualifiedTable;
  readonly slot?: string;
  readonly publication?: string;
  /** SQL (or a command) that fixes the problem. */
  readonly fix?: string;
  readonly [key: string]: unknown;
}

/** One failed start-up check. `table`/`slot`/`publication` say which object, `fix` what to run. */
export class SourceCheckError extends EventAssemblerError {
  declare readonly code: SourceCheckCode;
  declare readonly details: SourceCheckDetails;
  readonly table: QualifiedTable | undefined;
  readonly fix: string | undefined;

  constructor(code: SourceCheckCode, message: string, details: SourceCheckDetails = {}) {
    super(code, details.fix ? `${message}\n  fix: ${details.fix}` : message, details);
    this.table = details.table;
    this.fix = details.fix;
  }
}

/** Several start-up checks failed; `problems` holds each one. */
export class SourceChecksFailedError extends EventAssemblerError {
  readonly problems: readonly SourceCheckError[];

  constructor(problems: readonly SourceCheckError[]) {
    super(
      'SOURCE_CHECKS_FAILED',
      `${problems.length} source checks failed:\n${problems.map((p, i) => `${i + 1}. [${p.code}] ${p.message}`).join('\n')}`,
      { problems: problems.map((p) => ({ code: p.code, ...p.details })) },
    );
    this.problems = problems;
  }
}

/** What capture needs from one table. */
export interface CapturedTable {
  /** `schema.table`. */
  readonly table: QualifiedTable;
  /**
   * The mappers need the whole old row on update and delete (not just the key), which only
   * `REPLICA IDENTITY FULL` provides. Default: false.
   */
  readonly needsOldValues?: boolean;
}

/** The smallest query surface the checks need (a `pg.Client` or `pg.Pool` fits). */
export interface Queryable {
  query(sql: string, params?: unknown[]): Promise<{ rows: any[] }>;
}

const PLAIN_IDENTIFIER = /^[a-z_][a-z0-9_$]*$/;

/** Quotes an identifier only when PostgreSQL needs it, so fix SQL reads naturally. */
export function quoteIdent(name: string): string {
  return PLAIN_IDENTIFIER.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

export function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/** `public.invoice` → `{ schema: 'public', name: 'invoice' }`. Names are taken as stored (case-sensitive, unquoted). */
export function parseQualifiedTable(table: string): { schema: string; name: string } {
  const parts = table.split('.');
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw new SourceCheckError('SOURCE_TABLE_NAME_INVALID', `table "${table}" must be schema-qualified, e.g. public.invoice`, { table, fix: `write it as <schema>.<table>, e.g. public.${parts[parts.length - 1] || 'invoice'}` });
  }
  return { schema: parts[0], name: parts[1] };
}

/** `public.invoice` as SQL, e.g. `public.invoice` or `public."Invoice"`. */
export function tableSql(table: QualifiedTable): string {
  const { schema, name } = parseQualifiedTable(table);
  return `${quoteIdent(schema)}.${quoteIdent(name)}`;
}

export interface TableCheckResult {
  readonly table: QualifiedTable;
  readonly replicaIdentity: ReplicaIdentity;
  /** Columns of the key that identifies rows (primary key or replica identity index). */
  readonly keyColumns: readonly string[];
  readonly identityIndex: string | null;
}

const IDENTITY: Record<string, ReplicaIdentity> = { d: 'default', n: 'nothing', f: 'full', i: 'index' };

const TABLE_SQL = `
SELECT c.relkind,
       c.relreplident,
       (SELECT array_agg(a.attname::text ORDER BY k.ord)
          FROM pg_catalog.pg_index i
          CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
         WHERE i.indrelid = c.oid AND i.indisprimary) AS pk_columns,
       (SELECT ic.relname::text FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
         WHERE i.indrelid = c.oid AND i.indisreplident) AS identity_index,
       (SELECT array_agg(a.attname::text ORDER BY k.ord)
          FROM pg_catalog.pg_index i
          CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
         WHERE i.indrelid = c.oid AND i.indisreplident) AS identity_columns,
       (SELECT ic.relname::text FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
         WHERE i.indrelid = c.oid AND i.indisunique AND i.indimmediate AND i.indpred IS NULL AND i.indexprs IS NULL
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                            WHERE a.attrelid = c.oid AND a.attnum = ANY (i.indkey) AND NOT a.attnotnull)
         ORDER BY ic.relname LIMIT 1) AS candidate_index
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`;

/**
 * Checks one table: it exists, rows can be identified (primary key, or a replica identity
 * index), and its REPLICA IDENTITY gives what the configuration needs.
 */
export async function checkTable(db: Queryable, captured: CapturedTable): Promise<TableCheckResult> {
  const { table } = captured;
  const { schema, name } = parseQualifiedTable(table);
  const sqlName = tableSql(table);
  const { rows } = await db.query(TABLE_SQL, [schema, name]);
  const row = rows[0] as
    | { relreplident: string; pk_columns: string[] | null; identity_index: string | null; identity_columns: string[] | null; candidate_index: string | null }
    | undefined;
  if (!row) {
    throw new SourceCheckError('SOURCE_TABLE_MISSING', `captured table ${table} does not exist (or is not a table) in this database`, {
      table,
      fix: `create ${sqlName}, or remove ${table} from the configured tables`,
    });
  }
  const identity = IDENTITY[row.relreplident] ?? 'default';
  const pk = row.pk_columns ?? [];
  const keyFix = row.candidate_index
    ? `ALTER TABLE ${sqlName} ADD PRIMARY KEY (<columns>);  -- or use the unique index: ALTER TABLE ${sqlName} REPLICA IDENTITY USING INDEX ${quoteIdent(row.candidate_index)};`
    : `ALTER TABLE ${sqlName} ADD PRIMARY KEY (<columns>);`;

  if (identity === 'nothing') {
    throw new SourceCheckError(
      'SOURCE_REPLICA_IDENTITY_NOTHING',
      `captured table ${table} has REPLICA IDENTITY NOTHING: updates and deletes carry no key, and PostgreSQL rejects them on a published table`,
      { table, replicaIdentity: identity, fix: captured.needsOldValues ? `ALTER TABLE ${sqlName} REPLICA IDENTITY FULL;` : pk.length > 0 ? `ALTER TABLE ${sqlName} REPLICA IDENTITY DEFAULT;` : keyFix },
    );
  }
  if (identity === 'index' && !row.identity_index) {
    throw new SourceCheckError('SOURCE_TABLE_NO_KEY', `captured table ${table} has REPLICA IDENTITY USING INDEX but the index is gone`, { table, fix: keyFix });
  }
  const keyColumns = identity === 'index' ? (row.identity_columns ?? []) : pk;
  if (keyColumns.length === 0) {
    throw new SourceCheckError(
      'SOURCE_TABLE_NO_KEY',
      `captured table ${table} has no primary key and no replica identity index: its rows cannot be identified` +
        (identity === 'default' ? ', and PostgreSQL rejects UPDATE and DELETE on it once it is published' : ''),
      { table, replicaIdentity: identity, fix: keyFix },
    );
  }
  if (captured.needsOldValues && identity !== 'full') {
    throw new SourceCheckError(
      'SOURCE_REPLICA_IDENTITY_INSUFFICIENT',
      `captured table ${table} is configured with needsOldValues, which needs REPLICA IDENTITY FULL (it has ${identity.toUpperCase()}: old rows would carry only the key)`,
      { table, replicaIdentity: identity, fix: `ALTER TABLE ${sqlName} REPLICA IDENTITY FULL;` },
    );
  }
  return { table, replicaIdentity: identity, keyColumns, identityIndex: row.identity_index };
}

export interface SlotCheckResult {
  readonly slot: string;
  readonly database: string;
  readonly active: boolean;
  readonly activePid: number | null;
  readonly restartLsn: string | null;
  readonly confirmedFlushLsn: string | null;
  readonly walStatus: string | null;
}

/** The slot exists, is a logical pgoutput slot of this database, and can still serve changes. */
export async function checkSlot(db: Queryable, slot: string): Promise<SlotCheckResult> {
  const { rows } = await db.query(
    `SELECT s.slot_type, s.plugin, s.database::text AS database, current_database()::text AS current_db, s.active, s.active_pid,
            s.restart_lsn::text AS restart_lsn, s.confirmed_flush_lsn::text AS confirmed_flush_lsn, s.wal_status, s.invalidation_reason
       FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = $1`,
    [slot],
  );
  const row = rows[0] as
    | { slot_type: string; plugin: string | null; database: string | null; current_db: string; active: boolean; active_pid: number | null; restart_lsn: string | null; confirmed_flush_lsn: string | null; wal_status: string | null; invalidation_reason: string | null }
    | undefined;
  if (!row) {
    throw new SourceCheckError('SOURCE_SLOT_MISSING', `replication slot "${slot}" does not exist`, {
      slot,
      fix: `event-assembler setup --slot ${slot} …  (or: SELECT pg_create_logical_replication_slot(${quoteLiteral(slot)}, 'pgoutput');)`,
    });
  }
  if (row.slot_type !== 'logical' || row.plugin !== 'pgoutput') {
    throw new SourceCheckError(
      'SOURCE_SLOT_WRONG_KIND',
      `replication slot "${slot}" is a ${row.slot_type} slot${row.plugin ? ` with plugin ${row.plugin}` : ''}; capture needs a logical slot with plugin pgoutput`,
      { slot, slotType: row.slot_type, plugin: row.plugin, fix: `use another slot name, or (if nothing else uses it) SELECT pg_drop_replication_slot(${quoteLiteral(slot)}); then run setup again` },
    );
  }
  if (row.database !== row.current_db) {
    throw new SourceCheckError('SOURCE_SLOT_WRONG_DATABASE', `replication slot "${slot}" belongs to database ${row.database}, not ${row.current_db}`, {
      slot,
      fix: `connect to database ${row.database}, or create a slot for ${row.current_db} with a different name`,
    });
  }
  if (row.wal_status === 'lost' || row.invalidation_reason) {
    throw new SourceCheckError(
      'SOURCE_SLOT_INVALIDATED',
      `replication slot "${slot}" was invalidated (${row.invalidation_reason ?? 'wal_status = lost'}): the WAL it needs is gone, so capture cannot resume from it. ` +
        'Rebuild needed: a new slot and a new snapshot generation, then reconcile consumers — capture never restarts silently from a later position',
      { slot, walStatus: row.wal_status, invalidationReason: row.invalidation_reason, fix: `start the assembler with snapshot.mode 'when_needed': it re-creates the slot and reads every captured table as a new snapshot generation (docs/runbook.md, EventAssemblerSlotLost)` },
    );
  }
  return {
    slot,
    database: row.current_db,
    active: row.active,
    activePid: row.active_pid,
    restartLsn: row.restart_lsn,
    confirmedFlushLsn: row.confirmed_flush_lsn,
    walStatus: row.wal_status,
  };
}

/** The publications together contain exactly `tables` and publish inserts, updates and deletes. */
export async function checkPublications(db: Queryable, publications: readonly string[], tables: readonly QualifiedTable[]): Promise<void> {
  const wanted = new Set(tables);
  const present = new Set<string>();
  const label = publications.join(', ');
  const tableList = tables.map(tableSql).join(', ');
  for (const publication of publications) {
    const { rows } = await db.query('SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_catalog.pg_publication WHERE pubname = $1', [publication]);
    const pub = rows[0] as { puballtables: boolean; pubinsert: boolean; pubupdate: boolean; pubdelete: boolean; pubtruncate: boolean } | undefined;
    if (!pub) {
      throw new SourceCheckError('SOURCE_PUBLICATION_MISSING', `publication "${publication}" does not exist`, {
        publication,
        fix: `CREATE PUBLICATION ${quoteIdent(publication)} FOR TABLE ${tableList};  (or run event-assembler setup)`,
      });
    }
    if (pub.puballtables) {
      throw new SourceCheckError('SOURCE_PUBLICATION_MISMATCH', `publication "${publication}" is FOR ALL TABLES; capture needs exactly the configured tables`, {
        publication,
        fix: `DROP PUBLICATION ${quoteIdent(publication)}; CREATE PUBLICATION ${quoteIdent(publication)} FOR TABLE ${tableList};`,
      });
    }
    if (!pub.pubinsert || !pub.pubupdate || !pub.pubdelete) {
      throw new SourceCheckError('SOURCE_PUBLICATION_MISMATCH', `publication "${publication}" does not publish all of insert, update and delete`, {
        publication,
        fix: `ALTER PUBLICATION ${quoteIdent(publication)} SET (publish = 'insert, update, delete, truncate');`,
      });
    }
    const members = await db.query('SELECT schemaname::text AS schema, tablename::text AS name FROM pg_catalog.pg_publication_tables WHERE pubname = $1', [publication]);
    for (const m of members.rows as { schema: string; name: string }[]) present.add(`${m.schema}.${m.name}`);
  }
  const missing = [...wanted].filter((t) => !present.has(t));
  const extra = [...present].filter((t) => !wanted.has(t)).sort();
  if (missing.length > 0 || extra.length > 0) {
    const what = [missing.length ? `missing ${missing.join(', ')}` : '', extra.length ? `has unconfigured ${extra.join(', ')}` : ''].filter(Boolean).join('; ');
    throw new SourceCheckError(
      'SOURCE_PUBLICATION_MISMATCH',
      `publication ${label} does not contain exactly the configured tables: ${what}`,
      {
        publication: label,
        ...(missing.length === 1 ? { table: missing[0] } : {}),
        missing,
        extra,
        fix: publications.length === 1 ? `ALTER PUBLICATION ${quoteIdent(publications[0] ?? '')} SET TABLE ${tableList};` : `make the publications ${label} together cover exactly: ${tableList}`,
      },
    );
  }
}

/** `wal_level = logical` and the current role may replicate. */
export async function checkServer(db: Queryable): Promise<void> {
  const { rows } = await db.query(
    `SELECT current_setting('wal_level') AS wal_level, current_user::text AS role,
            (SELECT rolreplication OR rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) AS can_replicate`,
  );
  const row = rows[0] as { wal_level: string; role: string; can_replicate: boolean };
  if (row.wal_level !== 'logical') {
    throw new SourceCheckError('SOURCE_WAL_LEVEL', `the server runs with wal_level = ${row.wal_level}; logical decoding needs logical`, {
      fix: `ALTER SYSTEM SET wal_level = logical;  -- then restart PostgreSQL`,
    });
  }
  if (!row.can_replicate) {
    throw new SourceCheckError('SOURCE_ROLE_NOT_REPLICATION', `role ${row.role} lacks the REPLICATION attribute needed to stream from a slot`, {
      role: row.role,
      fix: `ALTER ROLE ${quoteIdent(row.role)} REPLICATION;`,
    });
  }
}

export interface StartupCheckOptions {
  readonly slot: string;
  readonly publications: readonly string[];
  readonly tables: readonly CapturedTable[];
}

export interface StartupCheckReport {
  readonly tables: readonly TableCheckResult[];
  readonly slot: SlotCheckResult;
}

/**
 * Runs every check and reports all problems at once: one {@link SourceCheckError} when a
 * single check fails, a {@link SourceChecksFailedError} listing each when several do.
 */
export async function runStartupChecks(db: Queryable, options: StartupCheckOptions): Promise<StartupCheckReport> {
  const problems: SourceCheckError[] = [];
  const attempt = async <T>(check: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await check();
    } catch (error) {
      if (error instanceof SourceCheckError) {
        problems.push(error);
        return undefined;
      }
      throw error;
    }
  };
  await attempt(() => checkServer(db));
  const tables: TableCheckResult[] = [];
  for (const table of options.tables) {
    const result = await attempt(() => checkTable(db, table));
    if (result) tables.push(result);
  }
  const slot = await attempt(() => checkSlot(db, options.slot));
  await attempt(() => checkPublications(db, options.publications, options.tables.map((t) => t.table)));
  if (problems.length === 1) throw problems[0];
  if (problems.length > 1) throw new SourceChecksFailedError(problems);
  return { tables, slot: slot as SlotCheckResult };
}
