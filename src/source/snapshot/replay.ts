/**
 * Replays snapshot records and changes onto an in-memory model of the source tables: the
 * reference a snapshot must reproduce (tests, reconciliation). Pure.
 */
import type { Change, QualifiedTable, Row, SnapshotRecord } from '../types.js';
import { isUnchangedToast } from '../types.js';
import { keyString } from './catalog.js';

export interface TableModel {
  /** keyString → row */
  readonly rows: Map<string, Row>;
}

export interface ReplayModel {
  readonly tables: Map<QualifiedTable, TableModel>;
  apply(unit: SnapshotRecord | Change): void;
  rows(table: QualifiedTable): Row[];
  /** Whether a row with this key exists in the model. */
  has(table: QualifiedTable, key: Row): boolean;
}

function keyFor(key: Row): string {
  return keyString(Object.keys(key).sort(), key);
}

export function createReplayModel(): ReplayModel {
  const tables = new Map<QualifiedTable, TableModel>();
  const table = (name: QualifiedTable): TableModel => {
    let t = tables.get(name);
    if (!t) {
      t = { rows: new Map() };
      tables.set(name, t);
    }
    return t;
  };
  return {
    tables,
    rows: (name) => [...(tables.get(name)?.rows.values() ?? [])],
    has: (name, key) => tables.get(name)?.rows.has(keyFor(key)) ?? false,
    apply(unit) {
      if ('kind' in unit) {
        table(unit.table).rows.set(keyFor(unit.change.key), unit.change.after);
        return;
      }
      switch (unit.op) {
        case 'insert':
          table(unit.table).rows.set(keyFor(unit.key), unit.after);
          return;
        case 'update': {
          const t = table(unit.table);
          const previous = t.rows.get(keyFor(unit.oldKey ?? unit.key));
          if (unit.oldKey) t.rows.delete(keyFor(unit.oldKey));
          const after: Record<string, unknown> = { ...unit.after };
          for (const [k, v] of Object.entries(after)) if (isUnchangedToast(v) && previous) after[k] = previous[k];
          t.rows.set(keyFor(unit.key), after);
          return;
        }
        case 'delete':
          table(unit.table).rows.delete(keyFor(unit.key));
          return;
        case 'truncate':
          for (const name of unit.tables) table(name).rows.clear();
          return;
        default:
          return;
      }
    },
  };
}
