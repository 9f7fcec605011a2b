import type { QualifiedTable, Row } from '../source/types.js';
import { MapperConfigError } from './mapper-error.js';
import type { AnyMapper, Mapper, MapperDefinition, TableAllowlist, TableDeclaration, TableRequirement } from './types.js';

// The declaration types live in types.ts; re-exported for modules that import them from here.
export type {
  AnyMapper,
  ColumnOf,
  EventFor,
  MappedEvent,
  Mapper,
  MapperDefinition,
  OnError,
  RowOf,
  TableAllowlist,
  TableDeclaration,
  TableDeclarations,
  TableRequirement,
  TableRows,
} from './types.js';

/**
 * Declares a mapper: the tables and columns it may see, and a `map` function from one complete
 * source transaction to zero or more business events.
 *
 * **Purity.** `map` must be a pure function of the transaction it is given: no clock
 * (`Date.now()`, `new Date()` — use `tx.commitTime`), no randomness (`Math.random()`,
 * `randomUUID()`), no I/O, no state kept between calls, no mutation of its input (the view is
 * frozen). Event ids are derived from the source position, the mapper name and the event's
 * ordinal, so a replayed transaction must yield the same events in the same order — that is
 * what lets the sink recognise duplicates. `checkMapperPurity` and the test kit's `mapperSpec`
 * run a mapper twice and report the first difference.
 *
 * **Allowlist.** Only the declared tables and `columns` reach `map`; undeclared tables,
 * columns and before-image columns are removed first (including key columns that are not
 * listed), so sensitive columns can never leak into events, metadata or failed records.
 *
 * **Typed events.** Pass the generated contracts map — `defineMapper<EventContracts>({…})` —
 * and `map` may only return `{ type, version, data }` combinations that exist in it, with
 * `data` of the contract's type. A second type argument types rows per table.
 */
export function defineMapper<C = Record<string, unknown>, DB = Record<string, Row>>(definition: MapperDefinition<C, DB>): Mapper<C, DB> {
  const name: unknown = definition.name;
  if (typeof name !== 'string' || name.trim() === '') throw new MapperConfigError(String(name), 'name', 'must be a non-empty string');
  if (typeof definition.map !== 'function') throw new MapperConfigError(name, 'map', 'must be a function (tx) => events');
  const onError: unknown = definition.onError ?? 'halt';
  if (onError !== 'halt' && onError !== 'park') throw new MapperConfigError(name, 'onError', `must be 'halt' or 'park', got ${JSON.stringify(onError)}`);
  const declared = definition.tables as Readonly<Record<string, TableDeclaration | undefined>>;
  if (declared === null || typeof declared !== 'object') throw new MapperConfigError(name, 'tables', 'must be an object keyed by schema-qualified table');
  const tables: Record<string, TableAllowlist> = {};
  for (const [table, declaration] of Object.entries(declared)) {
    if (declaration === undefined) continue;
    tables[table] = normalizeTable(name, table, declaration);
  }
  if (Object.keys(tables).length === 0) throw new MapperConfigError(name, 'tables', 'declares no table; a mapper must read at least one');
  return Object.freeze({ name, tables: Object.freeze(tables), map: definition.map, onError });
}

function normalizeTable(mapper: string, table: string, declaration: TableDeclaration): TableAllowlist {
  const field = `tables['${table}']`;
  if (!/^[^.\s]+\.[^.\s]+$/.test(table)) throw new MapperConfigError(mapper, field, 'table must be schema-qualified, e.g. public.invoice');
  const columns = stringList(mapper, `${field}.columns`, declaration.columns);
  if (columns.length === 0) throw new MapperConfigError(mapper, `${field}.columns`, 'declares no column');
  const before = declaration.before ?? 'none';
  if (before === 'none' || before === 'key') return Object.freeze({ columns, before });
  const beforeColumns = stringList(mapper, `${field}.before`, before);
  beforeColumns.forEach((column, i) => {
    if (!columns.includes(column)) {
      throw new MapperConfigError(mapper, `${field}.before[${i}]`, `"${column}" is not in ${field}.columns; a before-image column must also be allowlisted`);
    }
  });
  return Object.freeze({ columns, before: beforeColumns });
}

function stringList(mapper: string, field: string, value: unknown): readonly string[] {
  if (!Array.isArray(value)) throw new MapperConfigError(mapper, field, "must be an array of column names (or 'none' / 'key' for before)");
  value.forEach((column, i) => {
    if (typeof column !== 'string' || column === '') throw new MapperConfigError(mapper, `${field}[${i}]`, 'must be a non-empty column name');
    if (value.indexOf(column) !== i) throw new MapperConfigError(mapper, `${field}[${i}]`, `"${column}" is listed twice`);
  });
  return Object.freeze([...(value as string[])]);
}

/** Per table, what the mappers together need from the source (for the start-up check and the publication). */
export function mapperRequirements(mappers: readonly AnyMapper[]): Readonly<Record<QualifiedTable, TableRequirement>> {
  const acc = new Map<string, { columns: Set<string>; old: Set<string>; oldKey: boolean; mappers: string[] }>();
  for (const mapper of mappers) {
    for (const [table, allow] of Object.entries(mapper.tables)) {
      let entry = acc.get(table);
      if (!entry) acc.set(table, (entry = { columns: new Set(), old: new Set(), oldKey: false, mappers: [] }));
      allow.columns.forEach((c) => entry.columns.add(c));
      if (allow.before === 'key') entry.oldKey = true;
      else if (allow.before !== 'none') allow.before.forEach((c) => entry.old.add(c));
      entry.mappers.push(mapper.name);
    }
  }
  const out: Record<string, TableRequirement> = {};
  for (const [table, e] of [...acc.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    out[table] = Object.freeze({
      columns: [...e.columns].sort(),
      oldValueColumns: [...e.old].sort(),
      needsOldValues: e.old.size > 0,
      needsOldKey: e.oldKey || e.old.size > 0,
      mappers: e.mappers,
    });
  }
  return Object.freeze(out);
}

/** True when `requirement` needs old values of a column outside the replica identity key `keyColumns`. */
export function requiresReplicaIdentityFull(requirement: TableRequirement, keyColumns: readonly string[]): boolean {
  return requirement.oldValueColumns.some((c) => !keyColumns.includes(c));
}
