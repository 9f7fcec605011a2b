/**
 * pgoutput row messages → {@link Change}s, using the relation version current when the message
 * arrived (its decoders are built once per version).
 */
import { ProtocolStateError } from '../errors.js';
import type {
  DeleteMessage, InsertMessage, LogicalMessage, TruncateMessage, TupleData, UpdateMessage,
} from './pgoutput/messages.js';
import type { RelationEntry, RelationRegistry } from './relations.js';
import {
  UNCHANGED_TOAST,
  type DeleteChange, type InsertChange, type MessageChange, type RelationVersion, type Row, type TruncateChange, type UpdateChange,
} from './types.js';

/** Throws when a tuple's width does not match the relation version it is decoded with. */
export function checkWidth(entry: RelationEntry, tuple: TupleData): void {
  if (tuple.length !== entry.names.length) {
    throw new ProtocolStateError(
      `tuple of ${entry.version.table} has ${tuple.length} column(s), relation version ${entry.version.version} has ${entry.names.length}`,
      { table: entry.version.table, relationId: entry.version.relationId, tupleColumns: tuple.length, relationColumns: entry.names.length },
    );
  }
}

/** Every column of `tuple` as a Row (NULL → null, unchanged TOAST → {@link UNCHANGED_TOAST}). */
export function tupleToRow(entry: RelationEntry, tuple: TupleData): Record<string, unknown> {
  checkWidth(entry, tuple);
  const { names, decoders } = entry;
  const row: Record<string, unknown> = {};
  for (let i = 0; i < tuple.length; i++) {
    const v = tuple[i]!;
    switch (v.kind) {
      case 'text': row[names[i]!] = decoders[i]!(v.value); break;
      case 'null': row[names[i]!] = null; break;
      case 'unchanged-toast': row[names[i]!] = UNCHANGED_TOAST; break;
      // Binary format is not requested by this project; pass the server's bytes through.
      case 'binary': row[names[i]!] = v.value; break;
    }
  }
  return row;
}

/** The replica identity key columns of a decoded row. */
export function keyOf(entry: RelationEntry, row: Row): Row {
  const key: Record<string, unknown> = {};
  const { names, keyIndexes } = entry;
  for (let i = 0; i < keyIndexes.length; i++) {
    const name = names[keyIndexes[i]!]!;
    key[name] = row[name];
  }
  return key;
}

/** Value equality for decoded column values (bigint, Buffer, arrays, parsed JSON). */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return typeof a === 'number' && typeof b === 'number' && Number.isNaN(a) && Number.isNaN(b);
  }
  if (Buffer.isBuffer(a) || Buffer.isBuffer(b)) return Buffer.isBuffer(a) && Buffer.isBuffer(b) && a.equals(b);
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameValue(a[i], b[i])) return false;
    return true;
  }
  const ak = Object.keys(a);
  const bk = Object.keys(b);
  if (ak.length !== bk.length) return false;
  for (const k of ak) if (!sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}

function sameKey(a: Row, b: Row): boolean {
  for (const k in a) if (!sameValue(a[k], b[k])) return false;
  return true;
}

/**
 * Builders of the final change objects. V8 decides per allocation site (object literal) whether
 * to allocate in old space ("pretenuring") once objects from it tend to live long. Changes held
 * in memory by the transaction buffer train their site that way; changes read back from a spill
 * file and dropped at once must come from other sites, or each one lands in old space and drags
 * its young rows there through the old-to-new references (measured: +400 bytes of heap per row
 * until the next major GC). Hence one set of builders per use, each with its own literals.
 */
export interface ChangeBuilders {
  insert(relation: RelationVersion, after: Row, key: Row): InsertChange;
  update(relation: RelationVersion, before: Row | null, after: Row, key: Row, oldKey: Row | null): UpdateChange;
  delete(relation: RelationVersion, before: Row, key: Row): DeleteChange;
}

/** Default builders (changes kept in memory). */
export const heldChangeBuilders: ChangeBuilders = {
  insert: (relation, after, key) => ({ op: 'insert', table: relation.table, relation, after, key }),
  update: (relation, before, after, key, oldKey) => ({ op: 'update', table: relation.table, relation, before, after, key, oldKey }),
  delete: (relation, before, key) => ({ op: 'delete', table: relation.table, relation, before, key }),
};

export function insertChange(entry: RelationEntry, message: InsertMessage, build: ChangeBuilders = heldChangeBuilders): InsertChange {
  const after = tupleToRow(entry, message.newTuple);
  return build.insert(entry.version, after, keyOf(entry, after));
}

/**
 * `before`: the whole old row for REPLICA IDENTITY FULL (`O`), the old key columns for `K`
 * (sent when the key changed, or when a key column is stored out of line), else `null`.
 * Unchanged TOAST columns of the new row are filled from a FULL old row when it has the value.
 * `oldKey` is set only when the old key differs from the new one (with FULL every column is part
 * of the identity, as pgoutput flags them all, so any change of the row sets it).
 */
export function updateChange(entry: RelationEntry, message: UpdateMessage, build: ChangeBuilders = heldChangeBuilders): UpdateChange {
  const after = tupleToRow(entry, message.newTuple);
  let before: Row | null = null;
  if (message.oldTuple !== null) {
    if (message.oldKind === 'old') {
      const old = tupleToRow(entry, message.oldTuple);
      const newTuple = message.newTuple;
      for (let i = 0; i < newTuple.length; i++) {
        if (newTuple[i]!.kind === 'unchanged-toast') {
          const name = entry.names[i]!;
          const value = old[name];
          if (value !== UNCHANGED_TOAST) after[name] = value;
        }
      }
      before = old;
    } else {
      before = keyOf(entry, tupleToRow(entry, message.oldTuple));
    }
  }
  const key = keyOf(entry, after);
  let oldKey: Row | null = null;
  if (before !== null) {
    const previousKey = message.oldKind === 'key' ? before : keyOf(entry, before);
    if (!sameKey(previousKey, key)) oldKey = previousKey;
  }
  return build.update(entry.version, before, after, key, oldKey);
}

/** `before` is the whole old row for FULL, else only the key columns (pgoutput sends the rest as NULL). */
export function deleteChange(entry: RelationEntry, message: DeleteMessage, build: ChangeBuilders = heldChangeBuilders): DeleteChange {
  const old = tupleToRow(entry, message.oldTuple);
  const key = keyOf(entry, old);
  return build.delete(entry.version, message.oldKind === 'old' ? old : key, key);
}

export function truncateChange(registry: RelationRegistry, message: TruncateMessage): TruncateChange {
  return {
    op: 'truncate',
    tables: message.relationIds.map((id) => registry.mustGet(id).version.table),
    cascade: message.cascade,
    restartIdentity: message.restartIdentity,
  };
}

export function messageChange(message: LogicalMessage): MessageChange {
  return { op: 'message', prefix: message.prefix, content: message.content, transactional: message.transactional, lsn: message.lsn };
}

/** Converts a row message with the registry's current relation version. */
export function rowChange(registry: RelationRegistry, message: InsertMessage | UpdateMessage | DeleteMessage): InsertChange | UpdateChange | DeleteChange {
  return rowChangeOf(registry.mustGet(message.relationId), message);
}

/** Converts a row message with a given relation version's decoders. */
export function rowChangeOf(entry: RelationEntry, message: InsertMessage | UpdateMessage | DeleteMessage): InsertChange | UpdateChange | DeleteChange {
  switch (message.tag) {
    case 'insert': return insertChange(entry, message);
    case 'update': return updateChange(entry, message);
    case 'delete': return deleteChange(entry, message);
  }
}
