/**
 * The watermark window of incremental snapshots (DBLog, Andreakis & Papapanagiotou 2020;
 * Debezium's incremental snapshots): pure, no I/O.
 *
 * The chunk reader writes a low watermark into the WAL, selects a chunk of rows by primary
 * key, hands the rows to the window ({@link WatermarkWindow.addChunk}) and writes a high
 * watermark. The window consumes the change stream in commit order:
 *
 * - at the chunk's low watermark it starts noting which keys of the chunk's table change;
 * - at the high watermark, chunk rows whose key changed inside the window are dropped (the
 *   stream already carried a newer state, or the row's deletion), and the remaining rows are
 *   emitted as snapshot records right after the high watermark's transaction — after every
 *   change the chunk's SELECT could have missed, so a streamed change always supersedes a
 *   stale chunk row, and a chunk row is never older than a change emitted before it.
 *
 * Visibility gap (PostgreSQL-specific): a transaction's commit record enters the WAL (and clog)
 * before the transaction leaves the proc array, i.e. before new snapshots see it — microseconds
 * normally, as long as a synchronous standby takes to answer otherwise. Such a transaction can
 * precede the low watermark in the stream and still be unseen by the chunk's SELECT; DBLog's
 * rule alone would then emit the stale chunk row after the newer change. So the window keeps
 * every transaction (xid + keys of the chunk's table) since the table's first low watermark
 * (the reader writes an extra "priming" one before a table's first chunk); at the high
 * watermark it also drops keys of earlier transactions the chunk's snapshot did not see
 * ({@link invisibleTo}), and keeps those for the next chunk until a snapshot sees them.
 * Transactions from before that history are remembered by xid only (the last 100,000); if one
 * of them is unseen by the chunk's snapshot, its keys are unknown: the chunk is not emitted but
 * marked `retry` (the reader reads the range again later).
 *
 * Watermarks are transactional logical decoding messages (`pg_logical_emit_message(true, …)`),
 * so each arrives as a {@link MessageChange} inside its own transaction, in commit order with
 * the changes. A watermark carries the run id of the snapshot run that wrote it: watermarks of
 * other runs (an earlier run re-sent after a restart, another assembler on the same database)
 * are ignored, and a new low watermark of this run abandons a window whose high watermark never
 * came (the reader retried the chunk).
 */
import type { Change, QualifiedTable, Row, SnapshotRecord } from '../types.js';
import { keyString, type KeyText } from './catalog.js';

/** Prefix of watermark messages in the WAL. */
export const WATERMARK_PREFIX = 'event-assembler.watermark';

export interface Watermark {
  readonly kind: 'low' | 'high';
  /** Snapshot run that wrote it (a new one per process start of a snapshot). */
  readonly run: string;
  readonly generation: string;
  readonly table: QualifiedTable;
  /** Chunk sequence number within the run. */
  readonly chunk: number;
  /** Low watermarks: the table's key columns, so the window keeps only key strings of what changes. */
  readonly keyColumns?: readonly string[];
}

export function encodeWatermark(w: Watermark): string {
  return JSON.stringify({ kind: w.kind, run: w.run, generation: w.generation, table: w.table, chunk: w.chunk, ...(w.keyColumns ? { keyColumns: w.keyColumns } : {}) });
}

/** Parses a watermark message's content; `null` when it is not one. */
export function decodeWatermark(content: Buffer | string): Watermark | null {
  try {
    const v = JSON.parse(typeof content === 'string' ? content : content.toString('utf8')) as Partial<Watermark>;
    if ((v.kind === 'low' || v.kind === 'high') && typeof v.run === 'string' && typeof v.generation === 'string' && typeof v.table === 'string' && typeof v.chunk === 'number') {
      const keyColumns = Array.isArray(v.keyColumns) && v.keyColumns.every((k) => typeof k === 'string') ? v.keyColumns : undefined;
      return { kind: v.kind, run: v.run, generation: v.generation, table: v.table, chunk: v.chunk, ...(keyColumns ? { keyColumns } : {}) };
    }
  } catch {
    // not JSON: not ours
  }
  return null;
}

export interface ChunkRow {
  readonly after: Row;
  readonly key: Row;
}

/** One chunk as selected between the watermarks. */
export interface SnapshotChunk {
  readonly run: string;
  readonly generation: string;
  readonly table: QualifiedTable;
  readonly chunk: number;
  /** Key columns (primary key), in key order. */
  readonly keyColumns: readonly string[];
  /** Rows in key order. */
  readonly rows: readonly ChunkRow[];
  /** Text form of the last selected row's key: the resume point once this chunk is durable. `null` for an empty chunk. */
  readonly lastKey: KeyText | null;
  /** No rows beyond this chunk (up to the table's maximum key recorded at its start). */
  readonly tableDone: boolean;
  /**
   * The chunk SELECT's snapshot (`pg_current_snapshot()`, xids cut to 32 bits like the stream's).
   * A transaction it does not see (xid in `xip`, or at/after `xmax`) whose commit the stream
   * delivered *before* the low watermark was missed by the SELECT (see "visibility gap" above).
   * Default: none (DBLog's rule only).
   */
  readonly snapshot?: ChunkSnapshot;
}

export interface ChunkSnapshot {
  readonly xmin: number;
  readonly xmax: number;
  readonly xip: readonly number[];
}

/** Whether `xid` (32-bit) is invisible to `snapshot`: in progress, or not yet started when it was taken. */
export function invisibleTo(snapshot: ChunkSnapshot, xid: number): boolean {
  // Modulo-2^32 comparison, as PostgreSQL's TransactionIdFollowsOrEquals.
  return ((xid - snapshot.xmax) | 0) >= 0 || snapshot.xip.includes(xid);
}

export interface ChunkSummary {
  readonly run: string;
  readonly generation: string;
  readonly table: QualifiedTable;
  readonly chunk: number;
  readonly selected: number;
  readonly emitted: number;
  /** Rows dropped because the stream changed their key inside the window. */
  readonly superseded: number;
  readonly lastKey: KeyText | null;
  readonly tableDone: boolean;
  /**
   * The chunk could not be placed safely: transactions the stream delivered before this table's
   * history began were invisible to the chunk's snapshot (committed, but not yet visible — e.g.
   * waiting for a synchronous standby). Nothing was emitted; read the same range again.
   */
  readonly retry: boolean;
  /** With `retry`: the xids that blocked it. */
  readonly blockedBy: readonly number[];
}

/** The part of a transaction the window reads. */
export interface WindowTransaction {
  readonly xid: number;
}

export type WindowOutput<T> =
  | { readonly kind: 'transaction'; readonly transaction: T }
  | { readonly kind: 'snapshot'; readonly record: SnapshotRecord }
  /** After a chunk's records: once everything before it is durable, the chunk's progress may be saved. */
  | { readonly kind: 'chunk-complete'; readonly chunk: ChunkSummary };

export interface WatermarkWindow {
  /** The run whose watermarks this window follows. */
  readonly run: string;
  /** Hands over the rows selected for `chunk` (after its low watermark was committed, before its high one). */
  addChunk(chunk: SnapshotChunk): void;
  /**
   * Consumes one committed transaction (its changes in order) and returns what to pass on, in
   * order: the transaction itself, then — when it carried this run's high watermark — the
   * chunk's surviving rows as snapshot records and a `chunk-complete` marker.
   */
  accept<T extends WindowTransaction>(transaction: T, changes: Iterable<Change>): WindowOutput<T>[];
  /** Like {@link accept} for changes read from disk (a spilled transaction): holds only touched keys in memory. */
  acceptStream<T extends WindowTransaction>(transaction: T, changes: AsyncIterable<Change>): Promise<WindowOutput<T>[]>;
  /** The chunk whose window is open (low watermark seen, high not yet), if any. */
  readonly open: { readonly table: QualifiedTable; readonly chunk: number } | null;
}

interface TrackedTransaction {
  readonly xid: number;
  /** keyString of each key touched (both keys of a key change). */
  readonly keys: readonly string[];
  readonly truncated: boolean;
}

interface OpenWindow {
  readonly table: QualifiedTable;
  readonly chunk: number;
  /** Arrival sequence of the first transaction covered by `before` (or by this window's own history). */
  readonly coveredFrom: number;
  /** Transactions of `table` between the previous low watermark of the same table and this one. */
  readonly before: readonly TrackedTransaction[];
  data: SnapshotChunk | null;
}

/** Transactions touching one table since the last low watermark of that table (bounded, see MAX_TRACKED). */
interface History {
  readonly table: QualifiedTable;
  /**
   * Arrival sequence (of `seen`) of the first low watermark of this table in an unbroken chain:
   * every transaction since is accounted for (in `transactions`, in `carried`, or dropped once a
   * chunk snapshot saw it — visibility only grows).
   */
  readonly since: number;
  /** Transactions before the last low watermark not yet seen by a chunk snapshot (their keys stay relevant). */
  carried: TrackedTransaction[];
  /** From the low watermark (the reader writes them); `null` only for watermarks of older writers. */
  readonly keyColumns: readonly string[] | null;
  transactions: TrackedTransaction[];
}

/** Keys (full rows or key-only rows) a change touches in `table`; true for a truncate of `table`. */
function touchedRows(change: Change, table: QualifiedTable, out: Row[]): boolean {
  switch (change.op) {
    case 'insert':
      if (change.table === table) out.push(change.after);
      return false;
    case 'update':
      if (change.table === table) {
        out.push(change.after);
        if (change.oldKey) out.push(change.oldKey);
        else if (change.before) out.push(change.before);
      }
      return false;
    case 'delete':
      if (change.table === table) out.push(change.before);
      return false;
    case 'truncate':
      return change.tables.includes(table);
    default:
      return false;
  }
}

const NO_KEYS: readonly string[] = [];

/** Transactions remembered by xid (any table) to detect ones the history cannot account for. */
const SEEN_XIDS = 100_000;

/** Tracked transactions kept between watermarks at most; beyond it the pre-window check is skipped for the next chunk. */
const MAX_TRACKED = 200_000;

export function createWatermarkWindow(options: { readonly run: string }): WatermarkWindow {
  const { run } = options;
  let open: OpenWindow | null = null;
  let history: History | null = null;
  /** Ring of the xids of the last SEEN_XIDS transactions, by arrival sequence. */
  const seen = new Uint32Array(SEEN_XIDS);
  let seenCount = 0;
  /** A chunk handed over before its low watermark was seen in the stream (the reader runs ahead of the stream). */
  let early: SnapshotChunk | null = null;

  function close<T>(w: OpenWindow, transactions: readonly TrackedTransaction[], out: WindowOutput<T>[]): void {
    const data = w.data;
    if (!data) {
      // The reader writes the high watermark only after addChunk; without rows this high
      // watermark belongs to an attempt whose rows never arrived. Nothing to emit.
      return;
    }
    const snap = data.snapshot;
    const summary = {
      run, generation: data.generation, table: data.table, chunk: data.chunk, selected: data.rows.length, lastKey: data.lastKey, tableDone: data.tableDone,
    };
    if (snap) {
      // Transactions older than the history: any the snapshot did not see makes the chunk unsafe.
      const blockedBy: number[] = [];
      for (let seq = Math.max(0, seenCount - SEEN_XIDS); seq < w.coveredFrom; seq++) {
        const xid = seen[seq % SEEN_XIDS]!;
        if (invisibleTo(snap, xid)) blockedBy.push(xid);
      }
      if (blockedBy.length > 0) {
        out.push({ kind: 'chunk-complete', chunk: { ...summary, emitted: 0, superseded: 0, retry: true, blockedBy } });
        return;
      }
    }
    const touched = new Set<string>();
    let truncated = false;
    const mark = (tx: TrackedTransaction) => {
      if (tx.truncated) truncated = true;
      for (const key of tx.keys) touched.add(key);
    };
    for (const tx of transactions) mark(tx);
    if (snap) {
      const stillInvisible: TrackedTransaction[] = [];
      for (const tx of w.before) {
        if (!invisibleTo(snap, tx.xid)) continue;
        mark(tx);
        stillInvisible.push(tx);
      }
      // Those may stay invisible to the next chunk too (e.g. waiting for a synchronous standby).
      if (history?.table === data.table) history.carried = stillInvisible;
    }
    let emitted = 0;
    if (!truncated) {
      for (const r of data.rows) {
        if (touched.has(keyString(data.keyColumns, r.key))) continue;
        emitted += 1;
        out.push({
          kind: 'snapshot',
          record: { kind: 'snapshot', snapshotGeneration: data.generation, table: data.table, change: { op: 'read', table: data.table, after: r.after, key: r.key, snapshotGeneration: data.generation } },
        });
      }
    }
    out.push({
      kind: 'chunk-complete',
      chunk: { ...summary, emitted, superseded: data.rows.length - emitted, retry: false, blockedBy: [] },
    });
    // The next chunk of this table needs what happens until its low watermark; a finished table needs nothing.
    if (data.tableDone && history?.table === data.table) history = null;
  }

  /** Reads one transaction's changes in order, keeping only the keys it touched; `end()` yields the outputs. */
  function scanner<T extends WindowTransaction>(transaction: T) {
    const out: WindowOutput<T>[] = [{ kind: 'transaction', transaction }];
    let closing: { window: OpenWindow; transactions: TrackedTransaction[] } | null = null;
    let keys: string[] = [];
    let truncated = false;
    const scratch: Row[] = [];
    const flush = () => {
      if (history) {
        // Every transaction, even one not touching the table: its xid then counts as accounted for.
        history.transactions.push({ xid: transaction.xid, keys: keys.length > 0 ? keys : NO_KEYS, truncated });
        if (history.transactions.length > MAX_TRACKED) history = null;
      }
      keys = [];
      truncated = false;
    };
    return {
      step(change: Change) {
        if (change.op === 'message') {
          if (change.prefix !== WATERMARK_PREFIX) return;
          const w = decodeWatermark(change.content);
          if (!w || w.run !== run) return;
          flush();
          if (w.kind === 'low') {
            const data = early && early.table === w.table && early.chunk === w.chunk ? early : null;
            if (data) early = null;
            const previous = history?.table === w.table ? history : null;
            const before = previous ? [...previous.carried, ...previous.transactions] : [];
            const coveredFrom = previous ? previous.since : seenCount;
            const keyColumns = w.keyColumns ?? previous?.keyColumns ?? data?.keyColumns ?? null;
            // Until a chunk snapshot has judged them, all of `before` stays relevant (an abandoned or
            // retried window passes them on whole).
            history = { table: w.table, since: coveredFrom, keyColumns, transactions: [], carried: before };
            open = { table: w.table, chunk: w.chunk, coveredFrom, before, data };
          } else if (open && open.table === w.table && open.chunk === w.chunk && history) {
            closing = { window: open, transactions: history.transactions.slice() };
            // History keeps growing until the next low watermark (this window's transactions included).
            open = null;
          }
          return;
        }
        if (!history) return;
        if (touchedRows(change, history.table, scratch)) truncated = true;
        if (scratch.length > 0) {
          // Without key columns (a watermark from an older writer), the replica identity key of the change stands in.
          const cols = history.keyColumns ?? ('key' in change ? Object.keys(change.key) : []);
          for (const row of scratch) keys.push(keyString(cols, row));
          scratch.length = 0;
        }
      },
      end(): WindowOutput<T>[] {
        flush();
        seen[seenCount % SEEN_XIDS] = transaction.xid >>> 0;
        seenCount += 1;
        if (closing) close(closing.window, closing.transactions, out);
        return out;
      },
    };
  }

  return {
    run,
    get open() {
      return open ? { table: open.table, chunk: open.chunk } : null;
    },
    addChunk(chunk) {
      if (chunk.run !== run) throw new RangeError(`chunk of run ${chunk.run} handed to the window of run ${run}`);
      if (open && open.table === chunk.table && open.chunk === chunk.chunk) open.data = chunk;
      else early = chunk;
    },
    accept(transaction, changes) {
      const scan = scanner(transaction);
      for (const change of changes) scan.step(change);
      return scan.end();
    },
    async acceptStream(transaction, changes) {
      const scan = scanner(transaction);
      for await (const change of changes) scan.step(change);
      return scan.end();
    },
  };
}
