import type { QualifiedTable, Row, SourceUnit } from '../source/types.js';
import type { TableAllowlist } from './define-mapper.js';

/**
 * The allowlist filter: turns a source unit into what one mapper may see. Runs BEFORE `map`,
 * so a column a mapper did not declare can reach neither its events nor its error messages.
 */

/** One row change as a mapper sees it: allowlisted columns only. */
export interface VisibleChange {
  readonly op: 'insert' | 'update' | 'delete' | 'read';
  readonly table: QualifiedTable;
  /** Index of the change in the source transaction (all tables, before filtering). */
  readonly index: number;
  readonly after: Row | null;
  /** The declared before-image columns (see `TableDeclaration.before`), or `null`. */
  readonly before: Row | null;
  /** Allowlisted replica identity key columns. */
  readonly key: Row;
  /** Allowlisted previous key when an update changed the key, else `null`. */
  readonly oldKey: Row | null;
  readonly allow: TableAllowlist;
}

export interface VisibleUnit {
  readonly changes: readonly VisibleChange[];
  /** Declared tables truncated in this transaction. */
  readonly truncated: readonly QualifiedTable[];
}

export function pick(row: Row, columns: readonly string[]): Row {
  const out: Record<string, unknown> = {};
  for (const column of columns) {
    if (Object.prototype.hasOwnProperty.call(row, column)) out[column] = row[column];
  }
  return Object.freeze(out);
}

/** Applies `tables` (a mapper's allowlist) to `unit`. Undeclared tables disappear entirely. */
/**
 * Whether `visibleUnit(unit, tables)` would show the mapper anything — the same rules, without
 * building rows — so mappers with nothing to do cost no view (the hot path in the profile).
 */
export function touchesDeclaredTables(unit: SourceUnit, tables: Readonly<Record<QualifiedTable, TableAllowlist>>): boolean {
  if (unit.kind === 'snapshot') return tables[unit.change.table] !== undefined;
  for (const change of unit.changes) {
    if (change.op === 'truncate') {
      if (change.tables.some((table) => tables[table] !== undefined)) return true;
    } else if ((change.op === 'insert' || change.op === 'update' || change.op === 'delete') && tables[change.table] !== undefined) {
      return true;
    }
  }
  return false;
}

export function visibleUnit(unit: SourceUnit, tables: Readonly<Record<QualifiedTable, TableAllowlist>>): VisibleUnit {
  if (unit.kind === 'snapshot') {
    const allow = tables[unit.change.table];
    if (!allow) return { changes: [], truncated: [] };
    const change: VisibleChange = {
      op: 'read',
      table: unit.change.table,
      index: 0,
      after: pick(unit.change.after, allow.columns),
      before: null,
      key: pick(unit.change.key, allow.columns),
      oldKey: null,
      allow,
    };
    return { changes: [Object.freeze(change)], truncated: [] };
  }
  const changes: VisibleChange[] = [];
  const truncated = new Set<string>();
  unit.changes.forEach((change, index) => {
    if (change.op === 'truncate') {
      for (const table of change.tables) if (tables[table]) truncated.add(table);
      return;
    }
    if (change.op !== 'insert' && change.op !== 'update' && change.op !== 'delete') return;
    const allow = tables[change.table];
    if (!allow) return;
    const key = pick(change.key, allow.columns);
    let after: Row | null = null;
    let before: Row | null = null;
    let oldKey: Row | null = null;
    if (change.op === 'insert') {
      after = pick(change.after, allow.columns);
    } else if (change.op === 'update') {
      after = pick(change.after, allow.columns);
      oldKey = change.oldKey ? pick(change.oldKey, allow.columns) : null;
      if (allow.before === 'key') before = oldKey ?? key;
      else if (allow.before !== 'none') before = change.before ? pick(change.before, allow.before) : null;
    } else {
      if (allow.before === 'key') before = key;
      else if (allow.before !== 'none') before = pick(change.before, allow.before);
    }
    changes.push(Object.freeze({ op: change.op, table: change.table, index, after, before, key, oldKey, allow }));
  });
  return { changes, truncated: [...truncated].sort() };
}
