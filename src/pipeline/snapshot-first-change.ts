/**
 * "Entity streams begin at their beginning" for an interrupted initial snapshot resumed while
 * streaming (DESIGN invariant 9, docs/snapshots.md). The resumed run streams from the slot's
 * consistent point and reads the rest of the tables in chunks; without more, a row's first
 * streamed change could reach its stream before the row was read (a stream beginning with an
 * update), and a later chunk would re-state a row whose changes the stream already carries.
 *
 * The rule: the first streamed change of a row the snapshot has not read yet carries, in its
 * before-image, the row as it was at the consistent point. So, before that change's transaction
 * is handed on, the row's snapshot record is made from the before-image (same generation, table
 * and key as a chunk read would give it: same event ids) and delivered, and the key is marked
 * read; a row inserted after the consistent point is marked read at its insert; chunk rows with a
 * marked key are skipped. What the destination gets is what an uninterrupted initial snapshot
 * would have given: the row at the consistent point, then every change.
 *
 * "Read" means: the table is done; or the key lies at or before the table's `lastKey` (read at
 * the exported snapshot or by a durable chunk); or the key is marked. A row whose record the
 * killed process left in flight (pinned) is checked by event id first (snapshot-landed.ts).
 *
 * Crash safety: the transaction is acknowledged only once its before-image records are durable
 * and its marks saved with the progress record (snapshot-store.ts) — a gate on its checkpoint
 * entry, so the line goes on meanwhile; a restart loads every mark of the generation.
 */
import pg from 'pg';
import { canonicalKey } from '../mapping/index.js';
import {
  createReadKeySet, describeTable, keyAtOrBefore, keyString, type SnapshotProgress,
} from '../source/snapshot/index.js';
import { isUnchangedToast, type Change, type ChangeSequence, type Row, type RowChange, type SnapshotRecord } from '../source/types.js';
import type { CommittedTransaction } from '../buffer/index.js';
import { recordsLanded } from './snapshot-landed.js';
import type { PinnedPosition } from './snapshot-store.js';
import { queueSnapshotRecords, requestSave, type FirstChangeState, type ResumedTable, type SnapshotDeps } from './snapshot-state.js';
import { withClient } from './source-queries.js';

/** Before-image records delivered (and marks saved) at a time, so one progress record stays small. */
const BATCH = 1_000;

/** Every column a mapper allowlists for `table`, sorted. */
function mappedColumns(deps: SnapshotDeps, table: string): string[] {
  const columns = new Set<string>();
  for (const mapper of deps.config.mappers) for (const c of mapper.tables[table]?.columns ?? []) columns.add(c);
  return [...columns].sort();
}

/**
 * The first-change state of a resumed initial snapshot (`null` for any other kind): each
 * unfinished table described, whether its before-images hold the mapped columns (a warning
 * naming the table and the fix when they do not), the stored marks loaded.
 */
export async function prepareFirstChanges(deps: SnapshotDeps, progress: SnapshotProgress): Promise<FirstChangeState | null> {
  const { config, log, state } = deps;
  if (progress.kind !== 'initial') return null;
  const tables = new Map<string, ResumedTable>();
  await withClient(config.source.connection, async (client) => {
    for (const entry of progress.tables) {
      if (entry.status === 'done') continue;
      const describe = await describeTable(client, entry.table, { publications: config.source.publication });
      const r = await client.query<{ relreplident: string }>('SELECT relreplident::text FROM pg_class WHERE oid = $1::regclass', [describe.sql]);
      const replicaIdentity = r.rows[0]?.relreplident ?? 'd';
      const mapped = mappedColumns(deps, entry.table);
      const keyOnly = mapped.every((c) => describe.keyColumns.includes(c));
      const beforeImages = describe.keyColumns.length > 0 && (replicaIdentity === 'f' || keyOnly);
      tables.set(entry.table, { describe, replicaIdentity, mapped, beforeImages });
      if (!beforeImages) {
        log.warn('snapshot: resumed without before-images: an entity stream of this table may begin with a change, and a chunk may re-state a row its stream already has (DBLog semantics)', {
          table: entry.table, replicaIdentity, mappedColumns: mapped, keyColumns: describe.keyColumns,
          fix: `ALTER TABLE ${describe.sql} REPLICA IDENTITY FULL (before the snapshot is interrupted: only changes written after it carry full before-images)`,
        });
      }
    }
  });
  const readKeys = createReadKeySet(config.source.spillDir !== undefined ? { spillDir: config.source.spillDir } : {});
  for (const [table, key] of state.storedMarks) if (tables.has(table)) readKeys.add(table, key);
  const kept = [...tables.values()].filter((t) => t.beforeImages).map((t) => t.describe.table);
  log.info('snapshot: resumed initial snapshot keeps entity streams beginning at their beginning (before-images of first changes)', {
    generation: progress.generation, tables: kept, marksLoaded: state.storedMarks.length,
  });
  return {
    generation: progress.generation, tables, readKeys, counts: { beforeImages: 0, marked: 0, withoutImage: 0, skippedByChunk: 0 }, client: null,
  };
}

/** The row as it was before `change`, when it holds every mapped column; `null` otherwise. */
function beforeImage(change: RowChange, t: ResumedTable): Row | null {
  let image: Row | null;
  if (change.op === 'delete') image = change.before;
  else if (change.op === 'update') image = change.before ?? change.oldKey ?? change.key;
  else return null;
  if (!image) return null;
  // What a mapper can see of a read is its allowlisted columns: those must be there, whole.
  for (const column of t.mapped) {
    if (!(column in image) || isUnchangedToast(image[column])) return null;
  }
  for (const column of t.describe.keyColumns) if (!(column in image)) return null;
  return image;
}

function keyOf(t: ResumedTable, row: Row): Row {
  const key: Record<string, unknown> = {};
  for (const c of t.describe.keyColumns) key[c] = row[c];
  return key;
}

async function isRead(deps: SnapshotDeps, begin: FirstChangeState, t: ResumedTable, key: Row, k: string): Promise<boolean> {
  const entry = deps.state.incremental?.progress().tables.find((e) => e.table === t.describe.table);
  if (!entry || entry.status === 'done') return true;
  if (begin.readKeys.has(t.describe.table, k)) return true;
  if (entry.lastKey === null) return false;
  const client = async (): Promise<pg.ClientBase> => {
    if (!begin.client) {
      const c = new pg.Client({ connectionString: deps.config.source.connection });
      c.on('error', () => undefined);
      await c.connect();
      begin.client = c;
    }
    return begin.client;
  };
  return keyAtOrBefore(client, t.describe, key, entry.lastKey);
}

function mark(deps: SnapshotDeps, begin: FirstChangeState, table: string, k: string): void {
  begin.readKeys.add(table, k);
  deps.state.marks.push([table, k]);
  begin.counts.marked += 1;
}

/** The gate of one transaction: its before-image records durable and its marks saved (wrapped: an async function would await it). */
export type FirstChangeGate = { readonly until: Promise<void> } | null;

/**
 * Applies the first-change rule to one committed transaction, before it is handed on. Queues the
 * before-image records it calls for — each at the transaction's commit LSN with the change's
 * index as sequence, so a replay of the transaction gives them the same positions: after
 * everything earlier in every stream, before the transaction's own events — and asks for a save
 * of the marks (and pins) it made. Returns the gate the transaction's acknowledgement must wait
 * for (records durable, marks saved), `null` when it made none.
 */
export async function applyFirstChanges(deps: SnapshotDeps, tx: CommittedTransaction, changes: ChangeSequence, systemId: string): Promise<FirstChangeGate> {
  const { state } = deps;
  const begin = state.begin;
  const inc = state.incremental;
  if (!begin || !inc) return null;
  const gates: Promise<void>[] = [];
  let records: SnapshotRecord[] = [];
  let positions: PinnedPosition[] = [];
  let inFlight: Promise<void>[] = [];
  const queue = async (): Promise<void> => {
    if (records.length === 0) return;
    // Positions are deterministic (or inherited): a pin may go as soon as the record is durable.
    const queued = await queueSnapshotRecords(state, deps, { records, positions, systemId, kind: inc.progress().kind, unpin: true });
    inFlight.push(queued.durable);
    records = [];
    positions = [];
  };
  let index = -1;
  for (const change of changes as Iterable<Change>) {
    index += 1;
    if (change.op !== 'insert' && change.op !== 'update' && change.op !== 'delete') continue;
    const t = begin.tables.get(change.table);
    if (!t || !t.beforeImages) continue;
    const table = change.table;
    const oldKeyRow = change.op === 'update' && change.oldKey ? keyOf(t, change.oldKey) : keyOf(t, change.op === 'insert' ? change.after : change.key);
    const k = keyString(t.describe.keyColumns, oldKeyRow);
    const pin = `${table}\u0000${canonicalKey(oldKeyRow)}`;
    // Still pinned: a chunk that read the row since has dropped the pin once its progress was saved.
    const inherited = state.inheritedPins.has(pin) && state.pinned.has(pin);
    if (inherited || !(await isRead(deps, begin, t, oldKeyRow, k))) {
      if (change.op === 'insert') {
        mark(deps, begin, table, k);
      } else {
        const image = beforeImage(change, t);
        if (!image) {
          // Today's semantics for this row (docs/snapshots.md): no record, no mark.
          begin.counts.withoutImage += 1;
          continue;
        }
        const key = keyOf(t, image);
        const record: SnapshotRecord = { kind: 'snapshot', snapshotGeneration: begin.generation, table, change: { op: 'read', table, after: image, key, snapshotGeneration: begin.generation } };
        mark(deps, begin, table, k);
        let position: PinnedPosition | null = { lsn: tx.commitLsn, sequence: index };
        if (inherited) {
          // The last process handed this row's record to the sink (the row is unchanged since: this is its first change).
          const pinned = state.pinned.get(pin)!;
          const [landed] = await recordsLanded(deps.config, systemId, [record], [pinned]);
          state.inheritedPins.delete(pin);
          position = landed === 'all' ? null : landed === 'some' ? pinned : position;
        }
        if (position) {
          state.pinned.set(pin, position);
          records.push(record);
          positions.push(position);
          begin.counts.beforeImages += 1;
        } else {
          state.pinned.delete(pin);
        }
      }
    }
    if (change.op === 'update' && change.oldKey) {
      // The key changed: the row now under the new key is the stream's, a chunk must not re-read it.
      const newKey = keyOf(t, change.after);
      const k2 = keyString(t.describe.keyColumns, newKey);
      if (!(await isRead(deps, begin, t, newKey, k2))) mark(deps, begin, table, k2);
    }
    if (records.length >= BATCH) {
      // A bulk transaction: its pins (saved with every record) stay bounded — a batch lands before the next is made.
      gates.push(requestSave(state, () => state.progress ?? inc.progress()));
      await queue();
      await Promise.all(inFlight);
      inFlight = [];
    }
  }
  if (state.marks.length > 0 || records.length > 0) gates.push(requestSave(state, () => state.progress ?? inc.progress()));
  await queue();
  gates.push(...inFlight);
  return gates.length > 0 ? { until: Promise.all(gates).then(() => undefined) } : null;
}

/** Chunk records of a resumed initial snapshot: those whose key is marked read are dropped (and the mark forgotten: the chunk passed it). */
export function skipMarked(deps: SnapshotDeps, records: readonly SnapshotRecord[]): readonly SnapshotRecord[] {
  const begin = deps.state.begin;
  if (!begin || records.length === 0) return records;
  return records.filter((record) => {
    const t = begin.tables.get(record.table);
    if (!t || !t.beforeImages) return true;
    const k = keyString(t.describe.keyColumns, record.change.key);
    if (!begin.readKeys.has(record.table, k)) return true;
    begin.readKeys.delete(record.table, k);
    begin.counts.skippedByChunk += 1;
    return false;
  });
}

/** A table finished: its marks are no longer needed. */
export function tableFinished(deps: SnapshotDeps, table: string): void {
  deps.state.begin?.readKeys.dropTable(table);
}

export async function closeFirstChanges(begin: FirstChangeState | null): Promise<void> {
  if (!begin) return;
  begin.readKeys.close();
  const c = begin.client;
  begin.client = null;
  await c?.end().catch(() => undefined);
}
