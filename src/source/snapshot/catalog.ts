/**
 * What a snapshot needs to know about a table, read from the catalog: the columns pgoutput
 * would send (same names, same order, same value decoders), the primary key that orders and
 * identifies rows, and the planner's row estimate for progress.
 *
 * Keys travel in two forms: typed values in {@link Row}s (what mappers see, decoded exactly like
 * streamed values) and PostgreSQL's text form of each key column (`KeyText`), which is what
 * progress records store and what keyset pagination binds as `$n::type` — text survives JSON
 * and round-trips through PostgreSQL's input functions for every type.
 */
import pg from 'pg';
import { EventAssemblerError } from '../../errors.js';
import type { QualifiedTable, Row } from '../types.js';
import { decoderForType, type ValueDecoder } from '../values.js';

/** PostgreSQL text form of each key column, in key order. */
export type KeyText = readonly string[];

export interface SnapshotColumn {
  readonly name: string;
  readonly typeOid: number;
  /** Name pgoutput's Type message would carry (the base type's name for a domain). */
  readonly typeName: string;
  /** `format_type(atttypid, atttypmod)`, used to cast bound key parameters. */
  readonly sqlType: string;
  readonly decode: ValueDecoder;
}

export interface SnapshotTable {
  readonly table: QualifiedTable;
  /** `"schema"."name"`, always quoted. */
  readonly sql: string;
  /** Columns in attnum order, without dropped or generated ones (pgoutput in PostgreSQL 17 sends neither). */
  readonly columns: readonly SnapshotColumn[];
  /** Positions in {@link columns} of the primary key (or replica identity index) columns, in key order. Empty when the table has neither. */
  readonly keyIndexes: readonly number[];
  readonly keyColumns: readonly string[];
  /** `pg_class.reltuples`; `null` when the table was never analyzed/vacuumed (-1). */
  readonly estimatedRows: number | null;
  /**
   * The publications' row filter (PostgreSQL 15+ `WHERE (…)`, as `pg_get_expr` prints it; several
   * publications' filters OR-ed), applied to every snapshot read so the snapshot holds exactly the
   * rows the stream would carry. `null`: no filter.
   */
  readonly rowFilter: string | null;
  /**
   * Key columns that exist but are left out of the publication's column list: the table is then
   * read without key (pgoutput never sends those columns, so neither does the snapshot). Empty normally.
   */
  readonly unpublishedKeyColumns: readonly string[];
}

/** What the publications let through for one table (PostgreSQL 15+ column lists and row filters). */
export interface PublishedShape {
  /** Column names in the publication's column list; `null`: every column. */
  readonly columns: readonly string[] | null;
  readonly rowFilter: string | null;
}

/**
 * Reads the column list and row filter of `table` in `publications` from `pg_publication_tables`
 * (readable by any role). PostgreSQL before 15 has neither: `{ columns: null, rowFilter: null }`.
 * A table in several publications: a row passes if any publication's filter passes (a publication
 * without filter lets every row through), as pgoutput decides; column lists must be equal across
 * publications (PostgreSQL refuses different ones), so the first is used. A table in none of them:
 * no restriction (the source's start-up checks report it).
 */
export async function publishedShape(client: pg.ClientBase, table: QualifiedTable, publications: readonly string[]): Promise<PublishedShape> {
  if (publications.length === 0) return { columns: null, rowFilter: null };
  const version = await client.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
  if (Number(version.rows[0]!.v) < 150000) return { columns: null, rowFilter: null };
  const { schema, name } = splitTable(table);
  const r = await client.query<{ attnames: string[] | null; rowfilter: string | null }>(
    `SELECT attnames::text[] AS attnames, rowfilter FROM pg_catalog.pg_publication_tables WHERE pubname = ANY($1::text[]) AND schemaname = $2 AND tablename = $3`,
    [publications, schema, name],
  );
  if (r.rows.length === 0) return { columns: null, rowFilter: null };
  const rowFilter = r.rows.some((x) => x.rowfilter === null) ? null : r.rows.map((x) => `(${x.rowfilter})`).join(' OR ');
  return { columns: r.rows[0]!.attnames, rowFilter };
}

export class SnapshotError extends EventAssemblerError {
  constructor(code: string, message: string, details: object = {}, options?: { cause?: unknown }) {
    super(code, message, details, options);
  }
}

export const quoteIdentifier = (name: string): string => pg.escapeIdentifier(name);

export function splitTable(table: QualifiedTable): { schema: string; name: string } {
  const dot = table.indexOf('.');
  if (dot <= 0 || dot === table.length - 1 || table.indexOf('.', dot + 1) >= 0) {
    throw new SnapshotError('SNAPSHOT_TABLE_NAME_INVALID', `table "${table}" must be schema-qualified, e.g. public.${table}`, { table });
  }
  return { schema: table.slice(0, dot), name: table.slice(dot + 1) };
}

export function tableSql(table: QualifiedTable): string {
  const { schema, name } = splitTable(table);
  return `${quoteIdentifier(schema)}.${quoteIdentifier(name)}`;
}

interface ColumnRow { name: string; type_oid: number; type_name: string; sql_type: string }

/**
 * Reads a table's snapshot description. Needs only catalog access (any role). With
 * `publications`, the columns and rows are those the publications publish (column list, row
 * filter), so that a snapshot never holds a row or column the stream would not.
 */
export async function describeTable(client: pg.ClientBase, table: QualifiedTable, options: { readonly publications?: readonly string[] } = {}): Promise<SnapshotTable> {
  const { schema, name } = splitTable(table);
  const rel = await client.query<{ oid: number; reltuples: number }>(
    `SELECT c.oid::int AS oid, c.reltuples::float8 AS reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
    [schema, name],
  );
  const relation = rel.rows[0];
  if (!relation) throw new SnapshotError('SNAPSHOT_TABLE_MISSING', `table ${table} does not exist (or is not a table)`, { table });
  const cols = await client.query<ColumnRow>(
    `SELECT a.attname AS name, a.atttypid::int AS type_oid,
            CASE WHEN t.typtype = 'd' THEN bt.typname ELSE t.typname END AS type_name,
            format_type(a.atttypid, a.atttypmod) AS sql_type
       FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
      WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
      ORDER BY a.attnum`,
    [relation.oid],
  );
  const keys = await client.query<{ name: string; primary: boolean }>(
    `SELECT a.attname AS name, i.indisprimary AS primary
       FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, ord)
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
      WHERE i.indrelid = $1 AND (i.indisprimary OR i.indisreplident)
      ORDER BY i.indisprimary DESC, k.ord`,
    [relation.oid],
  );
  const shape = await publishedShape(client, table, options.publications ?? []);
  const published = shape.columns === null ? null : new Set(shape.columns);
  const primary = keys.rows.some((k) => k.primary);
  let keyColumns = keys.rows.filter((k) => k.primary === primary).map((k) => k.name);
  const unpublishedKeyColumns = published === null ? [] : keyColumns.filter((k) => !published.has(k));
  if (unpublishedKeyColumns.length > 0) keyColumns = [];
  const columns = cols.rows.filter((c) => published === null || published.has(c.name)).map((c) => ({
    name: c.name,
    typeOid: c.type_oid,
    typeName: c.type_name,
    sqlType: c.sql_type,
    decode: decoderForType(c.type_oid, c.type_name),
  }));
  const keyIndexes = keyColumns.map((k) => columns.findIndex((c) => c.name === k));
  return {
    table,
    sql: tableSql(table),
    columns,
    keyIndexes,
    keyColumns,
    estimatedRows: relation.reltuples < 0 ? null : Math.round(relation.reltuples),
    rowFilter: shape.rowFilter,
    unpublishedKeyColumns,
  };
}

/** ` WHERE <row filter>` or `''`. */
export function rowFilterClause(t: SnapshotTable): string {
  return t.rowFilter === null ? '' : ` WHERE ${t.rowFilter}`;
}

export function requireKey(t: SnapshotTable): void {
  if (t.unpublishedKeyColumns.length > 0) {
    throw new SnapshotError('SNAPSHOT_TABLE_NO_KEY', `table ${t.table}'s key column(s) ${t.unpublishedKeyColumns.join(', ')} are not in the publication's column list: it cannot be read in chunks`, {
      table: t.table,
      fix: 'add the key columns to the publication\'s column list (ALTER PUBLICATION … SET TABLE t (k, …))',
    });
  }
  if (t.keyIndexes.length === 0) {
    throw new SnapshotError('SNAPSHOT_TABLE_NO_KEY', `table ${t.table} has neither a primary key nor a replica identity index: it cannot be read in key order or in chunks`, {
      table: t.table,
      fix: `ALTER TABLE ${t.sql} ADD PRIMARY KEY (…)`,
    });
  }
}

/** Column list for SELECT/COPY. */
export function selectList(t: SnapshotTable): string {
  return t.columns.map((c) => quoteIdentifier(c.name)).join(', ');
}

export function orderBy(t: SnapshotTable): string {
  return t.keyColumns.map(quoteIdentifier).join(', ');
}

/** `(k1, k2) > ($n::t1, $n+1::t2)`; parameters are {@link KeyText}s. */
export function keyComparison(t: SnapshotTable, op: '>' | '<=', firstParam: number): string {
  const cols = t.keyIndexes.map((i) => quoteIdentifier(t.columns[i]!.name));
  const params = t.keyIndexes.map((i, n) => `$${firstParam + n}::${t.columns[i]!.sqlType}`);
  return `(${cols.join(', ')}) ${op} (${params.join(', ')})`;
}

/** Decodes one row of text values (null = SQL NULL) into a typed {@link Row}. */
export function decodeRow(t: SnapshotTable, texts: readonly (string | null)[]): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  const { columns } = t;
  for (let i = 0; i < columns.length; i++) {
    const v = texts[i];
    const c = columns[i]!;
    row[c.name] = v === null || v === undefined ? null : c.decode(v);
  }
  return row;
}

export function keyOfRow(t: SnapshotTable, row: Row): Row {
  const key: Record<string, unknown> = {};
  for (const name of t.keyColumns) key[name] = row[name];
  return key;
}

export function keyTextOf(t: SnapshotTable, texts: readonly (string | null)[]): KeyText {
  return t.keyIndexes.map((i) => texts[i] ?? '');
}

function keyReplacer(_k: string, v: unknown): unknown {
  return typeof v === 'bigint' ? `${v}n` : v;
}

/**
 * Canonical string of a key's typed values (bigint and Buffer safe), for set membership.
 * Two rows have the same key exactly when these strings are equal, because snapshot and
 * stream decode with the same decoders.
 */
export function keyString(keyColumns: readonly string[], row: Row): string {
  return JSON.stringify(keyColumns.map((c) => row[c] ?? null), keyReplacer);
}
