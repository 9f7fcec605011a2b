/**
 * Relation (table shape) tracking for pgoutput.
 *
 * pgoutput announces a table's shape with a Relation message before the first change of that
 * table in a session, and again after any relcache invalidation (ALTER TABLE, but also
 * harmless ones) — so repeated Relation messages with an unchanged shape are normal and yield
 * no {@link SchemaChange}. Each distinct shape becomes a new {@link RelationVersion}; the
 * per-column value decoders are built once per version (the hot path reuses them).
 *
 * Rename heuristic: pgoutput sends column names, types and flags but no attnums, so a rename
 * is inferred when the column count is unchanged and a column at the same position has the same
 * type OID but a different name (and neither name appears elsewhere in the other version).
 * Limit: "drop column x, add column y of the same type" in one step, with x last, looks exactly
 * like "rename x to y"; a rename combined with an add/drop is reported as drop + add.
 */
import { SchemaChangeError, ProtocolStateError, TableRenamedError, type SchemaChangeErrorCode } from '../errors.js';
import type { RelationMessage, TypeMessage } from './pgoutput/messages.js';
import type { ColumnDefinition, QualifiedTable, RelationVersion, SchemaChange } from './types.js';
import { builtinTypeName, decoderForType, type ValueDecoder } from './values.js';

/** What the change converter needs for one relation version. */
export interface RelationEntry {
  readonly version: RelationVersion;
  /** Column names, in tuple order. */
  readonly names: readonly string[];
  /** Text value decoder per column, in tuple order. */
  readonly decoders: readonly ValueDecoder[];
  /** Positions of the replica identity key columns. */
  readonly keyIndexes: readonly number[];
}

export interface RelationUpdate {
  readonly entry: RelationEntry;
  /** `null` when the shape is unchanged, or on first sight of a table with no known version. */
  readonly schemaChange: SchemaChange | null;
}

export interface RelationRegistryOptions {
  /**
   * Versions known from elsewhere (the catalog, a checkpoint): the first Relation message of
   * such a table is compared against it. Default: none — first sight yields no SchemaChange.
   */
  readonly known?: readonly RelationVersion[];
  /**
   * The captured tables: a Relation message that describes one of them (by OID) under another
   * name throws {@link TableRenamedError}. Default: none.
   */
  readonly captured?: readonly QualifiedTable[];
}

export interface RelationRegistry {
  /** Records a Relation message; returns the current entry and the SchemaChange, if any. Throws {@link SchemaChangeError} when a required column is affected (the registry is then left unchanged). */
  apply(message: RelationMessage): RelationUpdate;
  /** Records a Type message (sent for non-built-in column types before the Relation message). */
  recordType(message: TypeMessage): void;
  get(relationId: number): RelationEntry | undefined;
  /** Like {@link get} but throws when pgoutput has not described the relation yet. */
  mustGet(relationId: number): RelationEntry;
  byTable(table: QualifiedTable): RelationEntry | undefined;
  /**
   * Declares columns a consumer reads from `table`. A later Relation message that drops,
   * renames or retypes one of them (or lacks it) throws {@link SchemaChangeError}; when the
   * table is already known the columns are checked immediately.
   */
  requireColumns(table: QualifiedTable, columns: readonly string[]): void;
  /** Type name for an OID, from Type messages or the built-in table. */
  typeName(typeOid: number): string | undefined;
}

/** Builds the entry (decoders, key positions) for one relation version. */
export function createRelationEntry(version: RelationVersion): RelationEntry {
  const names: string[] = [];
  const decoders: ValueDecoder[] = [];
  const keyIndexes: number[] = [];
  version.columns.forEach((column, i) => {
    names.push(column.name);
    decoders.push(decoderForType(column.typeOid, column.typeName));
    if (column.isKey) keyIndexes.push(i);
  });
  return { version, names, decoders, keyIndexes };
}

function sameShape(a: RelationVersion, b: RelationVersion): boolean {
  if (a.table !== b.table || a.replicaIdentity !== b.replicaIdentity || a.columns.length !== b.columns.length) return false;
  for (let i = 0; i < a.columns.length; i++) {
    const x = a.columns[i]!;
    const y = b.columns[i]!;
    if (x.name !== y.name || x.typeOid !== y.typeOid || x.typeModifier !== y.typeModifier || x.isKey !== y.isKey) return false;
  }
  return true;
}

/** Differences between two versions of a table (see the module comment for the rename heuristic). */
export function diffRelations(previous: RelationVersion | null, current: RelationVersion): SchemaChange {
  const prevCols = previous?.columns ?? [];
  const curCols = current.columns;
  const prevByName = new Map(prevCols.map((c) => [c.name, c]));
  const curByName = new Map(curCols.map((c) => [c.name, c]));
  const renamed: { from: string; to: string }[] = [];
  const renamedFrom = new Set<string>();
  const renamedTo = new Set<string>();
  if (previous !== null && prevCols.length === curCols.length) {
    for (let i = 0; i < curCols.length; i++) {
      const p = prevCols[i]!;
      const c = curCols[i]!;
      if (p.name !== c.name && p.typeOid === c.typeOid && !curByName.has(p.name) && !prevByName.has(c.name)) {
        renamed.push({ from: p.name, to: c.name });
        renamedFrom.add(p.name);
        renamedTo.add(c.name);
      }
    }
  }
  const added = previous === null ? [] : curCols.filter((c) => !prevByName.has(c.name) && !renamedTo.has(c.name)).map((c) => c.name);
  const dropped = prevCols.filter((c) => !curByName.has(c.name) && !renamedFrom.has(c.name)).map((c) => c.name);
  const retyped: { column: string; fromType: number; toType: number; fromTypeModifier: number; toTypeModifier: number }[] = [];
  for (const c of curCols) {
    const p = prevByName.get(c.name);
    if (p !== undefined && (p.typeOid !== c.typeOid || p.typeModifier !== c.typeModifier)) {
      retyped.push({ column: c.name, fromType: p.typeOid, toType: c.typeOid, fromTypeModifier: p.typeModifier, toTypeModifier: c.typeModifier });
    }
  }
  return {
    op: 'schema',
    table: current.table,
    previous,
    current,
    added,
    dropped,
    renamed,
    retyped,
    replicaIdentityChanged: previous !== null && previous.replicaIdentity !== current.replicaIdentity,
  };
}

function columnRef(c: ColumnDefinition | undefined): { name: string; typeOid: number; typeName?: string } | null {
  if (c === undefined) return null;
  return c.typeName === undefined ? { name: c.name, typeOid: c.typeOid } : { name: c.name, typeOid: c.typeOid, typeName: c.typeName };
}

export function createRelationRegistry(options: RelationRegistryOptions = {}): RelationRegistry {
  const byId = new Map<number, RelationEntry>();
  const byName = new Map<QualifiedTable, RelationEntry>();
  const known = new Map<QualifiedTable, RelationVersion>((options.known ?? []).map((v) => [v.table, v]));
  const typeNames = new Map<number, string>();
  const required = new Map<QualifiedTable, Set<string>>();
  const captured = new Set(options.captured ?? []);

  const typeName = (oid: number) => typeNames.get(oid) ?? builtinTypeName(oid);

  function checkRequired(previous: RelationVersion | null, current: RelationVersion, change: SchemaChange | null): void {
    const columns = required.get(current.table) ?? (previous !== null ? required.get(previous.table) : undefined);
    if (columns === undefined) return;
    const curByName = new Map(current.columns.map((c) => [c.name, c]));
    const prevByName = new Map((previous?.columns ?? []).map((c) => [c.name, c]));
    for (const column of columns) {
      const before = prevByName.get(column);
      const after = curByName.get(column);
      const fail = (code: SchemaChangeErrorCode, afterColumn: ColumnDefinition | undefined): never => {
        throw new SchemaChangeError(code, {
          table: current.table, column, relationId: current.relationId, before: columnRef(before), after: columnRef(afterColumn),
        });
      };
      const rename = change?.renamed.find((r) => r.from === column);
      if (rename !== undefined) fail('SCHEMA_REQUIRED_COLUMN_RENAMED', curByName.get(rename.to));
      if (after === undefined) fail(before === undefined ? 'SCHEMA_REQUIRED_COLUMN_MISSING' : 'SCHEMA_REQUIRED_COLUMN_DROPPED', undefined);
      if (before !== undefined && after !== undefined && before.typeOid !== after.typeOid) fail('SCHEMA_REQUIRED_COLUMN_RETYPED', after);
    }
  }

  return {
    apply(message) {
      const table = `${message.schema}.${message.name}`;
      const columns: ColumnDefinition[] = message.columns.map((c) => {
        const name = typeName(c.typeOid);
        return name === undefined
          ? { name: c.name, typeOid: c.typeOid, typeModifier: c.typeModifier, isKey: (c.flags & 1) !== 0 }
          : { name: c.name, typeOid: c.typeOid, typeName: name, typeModifier: c.typeModifier, isKey: (c.flags & 1) !== 0 };
      });
      const renamedFrom = byId.get(message.relationId)?.version.table;
      if (renamedFrom !== undefined && renamedFrom !== table && captured.has(renamedFrom)) {
        throw new TableRenamedError({ from: renamedFrom, to: table, relationId: message.relationId });
      }
      const previousEntry = byId.get(message.relationId) ?? byName.get(table);
      const previous = previousEntry?.version ?? known.get(table) ?? null;
      const candidate: RelationVersion = {
        relationId: message.relationId, table, schema: message.schema, name: message.name,
        replicaIdentity: message.replicaIdentity, columns, version: previous === null ? 1 : previous.version,
      };
      if (previous !== null && sameShape(previous, candidate) && previous.relationId === candidate.relationId) {
        if (previousEntry !== undefined && previousEntry.version === previous) return { entry: previousEntry, schemaChange: null };
        // Same shape as the catalog's known version: adopt it without a SchemaChange.
        const entry = createRelationEntry(previous);
        byId.set(message.relationId, entry);
        byName.set(table, entry);
        return { entry, schemaChange: null };
      }
      let schemaChange: SchemaChange | null = null;
      let version = candidate;
      if (previous !== null) {
        version = { ...candidate, version: previous.version + 1 };
        schemaChange = diffRelations(previous, version);
      }
      checkRequired(previous, version, schemaChange);
      const entry = createRelationEntry(version);
      if (previousEntry !== undefined && previousEntry.version.table !== table) byName.delete(previousEntry.version.table);
      byId.set(message.relationId, entry);
      byName.set(table, entry);
      return { entry, schemaChange };
    },
    recordType(message) {
      typeNames.set(message.typeOid, message.name);
    },
    get: (relationId) => byId.get(relationId),
    mustGet(relationId) {
      const entry = byId.get(relationId);
      if (entry === undefined) {
        throw new ProtocolStateError(`change for relation ${relationId} before its Relation message`, { relationId });
      }
      return entry;
    },
    byTable: (table) => byName.get(table),
    requireColumns(table, columns) {
      let set = required.get(table);
      if (set === undefined) required.set(table, (set = new Set()));
      for (const c of columns) set.add(c);
      const current = byName.get(table)?.version;
      if (current !== undefined) {
        for (const column of columns) {
          if (!current.columns.some((c) => c.name === column)) {
            throw new SchemaChangeError('SCHEMA_REQUIRED_COLUMN_MISSING', { table, column, relationId: current.relationId, before: null, after: null });
          }
        }
      }
    },
    typeName,
  };
}
