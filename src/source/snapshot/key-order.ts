/**
 * Whether a streamed row's key lies at or before a snapshot's resume point (`lastKey`, the key of
 * the last durable chunk in PostgreSQL's text form) in the table's key order — i.e. whether the
 * snapshot has already read that row. Integer keys (int2/int4/int8/oid, composites of them) are
 * compared here; any other key type is compared by PostgreSQL itself (`ROW(…) <= ROW(…)` with the
 * columns' types), because its order (collations, numeric, uuid, …) is PostgreSQL's to define.
 */
import type pg from 'pg';
import type { Row } from '../types.js';
import type { KeyText, SnapshotTable } from './catalog.js';

const INTEGER_TYPES = new Set(['int2', 'int4', 'int8', 'oid']);

/** A key value in PostgreSQL's text form (what `$n::type` parses back), or `null` when it has none here. */
export function keyValueText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (Buffer.isBuffer(value)) return `\\x${value.toString('hex')}`;
  return null;
}

/** Whether every key column is an integer type (compared without asking PostgreSQL). */
export function hasIntegerKey(t: SnapshotTable): boolean {
  return t.keyIndexes.every((i) => INTEGER_TYPES.has(t.columns[i]!.typeName));
}

function compareIntegerKeys(t: SnapshotTable, key: Row, lastKey: KeyText): number {
  for (let n = 0; n < t.keyColumns.length; n++) {
    const a = BigInt(keyValueText(key[t.keyColumns[n]!]) ?? '0');
    const b = BigInt(lastKey[n]!);
    if (a !== b) return a < b ? -1 : 1;
  }
  return 0;
}

/**
 * `key <= lastKey` in the table's key order. `client` is asked only for non-integer keys (one
 * round trip); a key value without a text form counts as not read (the caller then treats the
 * row as not yet read — a before-image is emitted at most once anyway, see snapshot-first-change).
 */
export async function keyAtOrBefore(client: () => Promise<pg.ClientBase>, t: SnapshotTable, key: Row, lastKey: KeyText): Promise<boolean> {
  if (hasIntegerKey(t)) return compareIntegerKeys(t, key, lastKey) <= 0;
  const texts = t.keyColumns.map((c) => keyValueText(key[c]));
  if (texts.some((x) => x === null)) return false;
  const types = t.keyIndexes.map((i) => t.columns[i]!.sqlType);
  const left = types.map((type, n) => `$${n + 1}::${type}`);
  const right = types.map((type, n) => `$${types.length + n + 1}::${type}`);
  const c = await client();
  const r = await c.query<{ before: boolean }>(`SELECT ROW(${left.join(', ')}) <= ROW(${right.join(', ')}) AS before`, [...texts, ...lastKey]);
  return r.rows[0]?.before === true;
}
