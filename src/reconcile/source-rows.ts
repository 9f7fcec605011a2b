/**
 * The source side: one ordered scan (COPY, text format) per reconciler's table at the cut, only
 * the reconciler's columns, and only rows the publications carry (their row filter). Values are
 * decoded with the decoders the stream uses, so `expected(row)` sees what a mapper would.
 */
import type pg from 'pg';
import { copyOut, describeTable, quoteIdentifier, rowFilterClause, type SnapshotTable } from '../source/snapshot/index.js';
import type { AnyReconciler } from './define-reconciler.js';
import { ReconcileError } from './errors.js';

export interface SourceTable {
  readonly description: SnapshotTable;
  /** Indexes in the COPY's column list of the reconciler's columns (as named there). */
  readonly columns: readonly { readonly name: string; readonly decode: (text: string) => unknown }[];
  /** Key columns the reconciler reads (a report names the key only with all of them). */
  readonly keyColumns: readonly string[];
  /** Rows the table is estimated to hold (sizes the key ranges and a sample's share); 0 when unknown. */
  readonly estimatedRows: number;
}

/**
 * `pg_class.reltuples` is -1 until the table is first vacuumed or analyzed; the statistics'
 * live-row count (kept as rows are written) covers a young table.
 */
async function estimateRows(client: pg.ClientBase, table: SnapshotTable): Promise<number> {
  const r = await client.query<{ n: string | null }>(`SELECT n_live_tup::text AS n FROM pg_stat_all_tables WHERE relid = $1::regclass`, [table.sql]);
  return Math.max(table.estimatedRows ?? 0, Number(r.rows[0]?.n ?? 0));
}

/** Describes the reconciler's table and checks it: exists, has a primary key, has every column. */
export async function sourceTable(client: pg.ClientBase, reconciler: AnyReconciler, publications: readonly string[]): Promise<SourceTable> {
  let description: SnapshotTable;
  try {
    description = await describeTable(client, reconciler.table, { publications });
  } catch (error) {
    throw new ReconcileError('RECONCILE_RECONCILER_INVALID', `reconciler ${reconciler.name}: ${(error as Error).message}`, { reconciler: reconciler.name, table: reconciler.table }, { cause: error });
  }
  if (description.keyColumns.length === 0) {
    throw new ReconcileError('RECONCILE_RECONCILER_INVALID', `reconciler ${reconciler.name}: table ${reconciler.table} has no primary key (or its key is not published): it cannot be scanned in key order`, {
      reconciler: reconciler.name,
      table: reconciler.table,
    });
  }
  const columns = reconciler.columns.map((name: string) => {
    const column = description.columns.find((c) => c.name === name);
    if (!column) {
      throw new ReconcileError('RECONCILE_RECONCILER_INVALID', `reconciler ${reconciler.name}: table ${reconciler.table} has no (published) column "${name}"`, { reconciler: reconciler.name, table: reconciler.table, column: name });
    }
    return { name, decode: column.decode };
  });
  const keyColumns = description.keyColumns.every((k) => reconciler.columns.includes(k)) ? description.keyColumns : [];
  return { description, columns, keyColumns, estimatedRows: await estimateRows(client, description) };
}

/** Tables estimated at up to this many rows are sampled exactly (a random sort of the whole table is cheap). */
const EXACT_SAMPLE_ROWS = 100_000;

/** How a sample is drawn: exactly `rows` by a random sort, or BERNOULLI at `percent` cut to `rows`. */
type Sampling = { readonly rows: number; readonly percent: number; readonly exact: boolean };

function selectSql(t: SourceTable, sample: Sampling | null): string {
  const d = t.description;
  const list = t.columns.map((c) => quoteIdentifier(c.name)).join(', ');
  const order = d.keyColumns.map(quoteIdentifier).join(', ');
  if (sample?.exact) {
    // Exactly `rows` (or every row of a smaller table), drawn at random, then in key order.
    return `SELECT * FROM (SELECT ${list} FROM ${d.sql}${rowFilterClause(d)} ORDER BY random() LIMIT ${sample.rows}) AS sampled ORDER BY ${order}`;
  }
  const from = sample ? `${d.sql} TABLESAMPLE BERNOULLI (${sample.percent})` : d.sql;
  const limit = sample ? ` LIMIT ${sample.rows}` : '';
  return `SELECT ${list} FROM ${from}${rowFilterClause(d)} ORDER BY ${order}${limit}`;
}

/**
 * The table's rows at the cut, in key order, decoded (`client` is in the cut's transaction). With
 * `sample`, that many rows drawn at random: exactly, by a random sort, in a table estimated at up to
 * 100,000 rows; about that many (BERNOULLI over the estimated row count) in a larger one.
 */
export async function* sourceRows(client: pg.ClientBase, t: SourceTable, sample: number | null = null): AsyncGenerator<Record<string, unknown>[]> {
  let sampling: Sampling | null = null;
  if (sample !== null) {
    const estimated = Math.max(1, t.estimatedRows || sample);
    // Larger tables: three times the share needed, so the LIMIT (not the luck of the draw) sets the
    // count (with 1.5 × and a table of 12 rows, a sample of 4 came back with 2 about once in 15).
    sampling = { rows: sample, percent: Math.min(100, Math.max(0.0001, (sample / estimated) * 100 * 3)), exact: estimated <= EXACT_SAMPLE_ROWS };
  }
  const sql = `COPY (${selectSql(t, sampling)}) TO STDOUT`;
  for await (const batch of copyOut(client, sql, { batchRows: 2000 })) {
    const rows = batch.map((texts) => {
      const row: Record<string, unknown> = {};
      for (let i = 0; i < t.columns.length; i++) {
        const text = texts[i];
        const c = t.columns[i]!;
        row[c.name] = text === null || text === undefined ? null : c.decode(text);
      }
      return row;
    });
    yield rows;
  }
}
