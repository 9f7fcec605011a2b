/**
 * Incremental, resumable snapshots running alongside streaming (DBLog / Debezium incremental
 * snapshots): each table is read in primary-key chunks, `WHERE (k1, k2) > (last) AND (k1, k2)
 * <= (max) ORDER BY k1, k2 LIMIT n`, each chunk bracketed by a low and a high watermark
 * written into the WAL with `pg_logical_emit_message(true, 'event-assembler.watermark', …)`.
 * The {@link WatermarkWindow} (fed by the pipeline with the stream's committed transactions)
 * drops chunk rows whose key changed between the watermarks and emits the rest after the high
 * watermark. Progress is saved when the pipeline reports a chunk durable, so a restart
 * resumes after the last durable chunk.
 *
 * Privileges: the capture role needs nothing beyond SELECT on the tables: in PostgreSQL 17
 * `pg_logical_emit_message` is executable by PUBLIC. (A watermark *table* — Debezium's
 * signalling table — would need INSERT/UPDATE on it and its membership in the publication.)
 *
 * The `maxKey` recorded when a table starts bounds the chunks: rows inserted later arrive
 * through the stream anyway, and a table under constant inserts still finishes.
 *
 * Visibility gap: PostgreSQL writes a transaction's commit record (and marks it committed in
 * clog) before the transaction leaves the proc array, i.e. before new snapshots see it, so a
 * transaction can precede the low watermark in the stream and still be unseen by the chunk's
 * SELECT. Each chunk therefore carries its snapshot (`pg_current_snapshot()`: xmin, xmax, xip)
 * and the window drops keys of earlier transactions that snapshot did not see (see
 * watermark-window.ts). Before a table's first chunk the reader writes one extra ("priming") low
 * watermark so the window has that table's history. A chunk the window cannot place safely comes
 * back marked `retry`; the reader reads the range again after a delay (doubling to 5 s) and
 * fails with `SNAPSHOT_CHUNK_BLOCKED` after `maxChunkRetries`.
 */
import { connectSource } from '../connect-source.js';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { QualifiedTable } from '../types.js';
import {
  decodeRow, describeTable, keyComparison, keyOfRow, keyTextOf, orderBy, quoteIdentifier, requireKey, rowFilterClause, selectList,
  SnapshotError, type KeyText, type SnapshotTable,
} from './catalog.js';
import { updateTable, type SnapshotProgress, type SnapshotProgressStore, isSnapshotFinished } from './progress.js';
import {
  createWatermarkWindow, encodeWatermark, WATERMARK_PREFIX, type ChunkSnapshot, type ChunkSummary, type SnapshotChunk, type WatermarkWindow, type WindowOutput,
} from './watermark-window.js';

/** A chunk the window placed: `saved` settles once chunkDurable saved its progress (`null` for `retry`). */
interface Placed {
  readonly outcome: ChunkSummary;
  readonly saved: Promise<void> | null;
}

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined); // a chunk the reader no longer waits for (closed) fails unobserved
  return { promise, resolve, reject };
}

export interface IncrementalSnapshotOptions {
  /** Capture role connection (SELECT on the tables); a plain connection. */
  readonly connection: string | pg.ClientConfig;
  /** Progress to run (a new one from `newSnapshotProgress`, or the loaded one to resume). */
  readonly progress: SnapshotProgress;
  readonly store: SnapshotProgressStore;
  /** Rows per chunk. Default: 1024. */
  readonly chunkSize?: number;
  /** The capture's publication(s): chunks read only their published columns and rows (column list, row filter). Default: none. */
  readonly publications?: readonly string[];
  /** Id written into this run's watermarks. Default: random. */
  readonly run?: string;
  /**
   * Called with each chunk after its rows are selected and handed to the window, before its high
   * watermark is written. For tests that must change rows inside a window (DBLog's hardest case). Default: none.
   */
  readonly onChunkSelected?: (chunk: SnapshotChunk) => Promise<void> | void;
  /** Re-reads of a chunk the window marked `retry` before failing with `SNAPSHOT_CHUNK_BLOCKED`. Default: 20. */
  readonly maxChunkRetries?: number;
  /** First delay before a re-read, doubled each time up to 5 s. Default: 100 ms. */
  readonly retryDelayMs?: number;
  /** Told about each chunk marked `retry` (and the attempt number). */
  readonly onRetry?: (chunk: ChunkSummary, attempt: number) => void;
  /** Called after each saved chunk (progress reporting). */
  readonly onProgress?: (progress: SnapshotProgress, chunk: ChunkSummary) => void;
  /**
   * Chunks read while the chunk before them is placed in the stream but its progress not saved
   * yet. 0: each chunk waits until the one before is durable and saved. 1: the next chunk is read
   * (its watermarks, its SELECT) while the one before is mapped and appended — its range starts
   * after that chunk's last key, known once the window placed it. Default: 0.
   */
  readonly readAhead?: number;
}

export interface IncrementalSnapshot {
  /**
   * Feed it the stream's committed transactions, in order; pass its outputs downstream in order.
   * A `chunk-complete` it gives tells the reader where the next chunk starts (or that the range
   * must be read again).
   */
  readonly window: WatermarkWindow;
  /**
   * Reads every unfinished table chunk by chunk; resolves with the final progress, once every
   * chunk's progress is saved. Chunk k + 1 + `readAhead` waits for {@link chunkDurable} of chunk k.
   */
  run(signal?: AbortSignal): Promise<SnapshotProgress>;
  /**
   * The pipeline made a `chunk-complete` marker (and everything before it) durable: saves progress,
   * lets the next chunk start. `covered`: passed to the store's save of that progress.
   */
  chunkDurable(chunk: ChunkSummary, covered?: readonly string[]): Promise<void>;
  progress(): SnapshotProgress;
  close(): Promise<void>;
}

const TEXT_TYPES = { getTypeParser: () => (value: string) => value };

function clientConfig(connection: string | pg.ClientConfig): pg.ClientConfig {
  return typeof connection === 'string' ? { connectionString: connection } : connection;
}

/** Writes one watermark; autocommit, so it is a transaction of its own. */
async function emitWatermark(client: pg.ClientBase, content: string): Promise<void> {
  await client.query('SELECT pg_logical_emit_message(true, $1, $2)', [WATERMARK_PREFIX, content]);
}

async function maxKeyOf(client: pg.ClientBase, t: SnapshotTable): Promise<KeyText | null> {
  const keys = t.keyColumns.map(quoteIdentifier);
  const r = await client.query({
    text: `SELECT ${keys.join(', ')} FROM ${t.sql}${rowFilterClause(t)} ORDER BY ${keys.map((k) => `${k} DESC`).join(', ')} LIMIT 1`,
    rowMode: 'array',
    types: TEXT_TYPES,
  });
  const row = r.rows[0] as (string | null)[] | undefined;
  return row ? row.map((v) => v ?? '') : null;
}

/**
 * The reader's waits: `until(promise)` settles as `promise` does, or fails with SNAPSHOT_ABORTED
 * once the signal aborts, or with SNAPSHOT_STOPPED once `stop()` is called (the snapshot closed).
 */
function createWaits(generation: () => string) {
  const waits = new Set<(error: unknown) => void>();
  return {
    until<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const end = () => {
          waits.delete(fail);
          signal?.removeEventListener('abort', onAbort);
        };
        const fail = (error: unknown) => {
          end();
          reject(error);
        };
        const onAbort = () => fail(new SnapshotError('SNAPSHOT_ABORTED', 'incremental snapshot aborted', { generation: generation() }));
        waits.add(fail);
        signal?.addEventListener('abort', onAbort, { once: true });
        promise.then((value) => {
          end();
          resolve(value);
        }, fail);
      });
    },
    stop(): void {
      const stopped = new SnapshotError('SNAPSHOT_STOPPED', 'incremental snapshot closed', { generation: generation() });
      for (const fail of [...waits]) fail(stopped);
    },
  };
}

export function createIncrementalSnapshot(options: IncrementalSnapshotOptions): IncrementalSnapshot {
  const run = options.run ?? randomBytes(8).toString('hex');
  const chunkSize = options.chunkSize ?? 1024;
  const inner = createWatermarkWindow({ run });
  let progress = options.progress;
  let client: pg.Client | null = null;
  let closed = false;
  let chunkSeq = 0;
  let lastCounted = 0;
  const maxRetries = options.maxChunkRetries ?? 20;
  const retryDelayMs = options.retryDelayMs ?? 100;
  const readAhead = Math.max(0, options.readAhead ?? 0);
  /** The chunk whose high watermark the reader wrote (or is writing), until the window places it. */
  let placing: { chunk: number; resolve: (placed: Placed) => void } | null = null;
  /** Chunks placed (not `retry`) until {@link IncrementalSnapshot.chunkDurable} saved their progress. */
  const landings = new Map<number, Deferred>();

  function placed<T>(outputs: WindowOutput<T>[]): WindowOutput<T>[] {
    for (const output of outputs) {
      if (output.kind !== 'chunk-complete') continue;
      const summary = output.chunk;
      const landing = summary.retry ? null : deferred();
      if (landing) landings.set(summary.chunk, landing);
      if (placing?.chunk === summary.chunk) placing.resolve({ outcome: summary, saved: landing?.promise ?? null });
    }
    return outputs;
  }
  const window: WatermarkWindow = {
    run,
    get open() {
      return inner.open;
    },
    addChunk: (chunk) => inner.addChunk(chunk),
    accept: (transaction, changes) => placed(inner.accept(transaction, changes)),
    acceptStream: async (transaction, changes) => placed(await inner.acceptStream(transaction, changes)),
  };

  const { until, stop } = createWaits(() => progress.generation);

  async function connect(): Promise<pg.Client> {
    if (client) return client;
    const c = await connectSource(clientConfig(options.connection));
    await c.query(`SET DateStyle = 'ISO, MDY'; SET IntervalStyle = 'postgres'; SET bytea_output = 'hex'`);
    client = c;
    return c;
  }

  async function selectChunk(c: pg.Client, t: SnapshotTable, lastKey: KeyText | null, maxKey: KeyText): Promise<{ rows: (string | null)[][]; snapshot: ChunkSnapshot }> {
    await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    try {
      // First statement: takes the transaction's snapshot, which goes to the window with the rows.
      const snap = await c.query<{ xmin: string; xmax: string; xip: string[] }>(
        `SELECT pg_snapshot_xmin(s)::text AS xmin, pg_snapshot_xmax(s)::text AS xmax, ARRAY(SELECT x::text FROM pg_snapshot_xip(s) x) AS xip FROM pg_current_snapshot() s`,
      );
      // The stream carries 32-bit xids; xid8 is epoch << 32 | xid.
      const xid32 = (x: string) => Number(BigInt(x) & 0xffff_ffffn);
      const row = snap.rows[0]!;
      const snapshot: ChunkSnapshot = { xmin: xid32(row.xmin), xmax: xid32(row.xmax), xip: row.xip.map(xid32) };
      const params: string[] = [];
      const where: string[] = [];
      if (lastKey) {
        where.push(keyComparison(t, '>', 1));
        params.push(...lastKey);
      }
      where.push(keyComparison(t, '<=', params.length + 1));
      params.push(...maxKey);
      if (t.rowFilter !== null) where.push(`(${t.rowFilter})`);
      const r = await c.query({
        text: `SELECT ${selectList(t)} FROM ${t.sql} WHERE ${where.join(' AND ')} ORDER BY ${orderBy(t)} LIMIT ${chunkSize}`,
        values: params,
        rowMode: 'array',
        types: TEXT_TYPES,
      });
      await c.query('COMMIT');
      return { rows: r.rows as (string | null)[][], snapshot };
    } catch (error) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }

  async function save(next: SnapshotProgress, covered?: readonly string[]): Promise<void> {
    await options.store.save(next, covered);
    progress = next;
  }

  function checkAbort(signal?: AbortSignal): void {
    if (closed) throw new SnapshotError('SNAPSHOT_STOPPED', 'incremental snapshot closed', { generation: progress.generation });
    if (signal?.aborted) throw new SnapshotError('SNAPSHOT_ABORTED', 'incremental snapshot aborted', { generation: progress.generation }, { cause: signal.reason });
  }

  async function readTable(c: pg.Client, table: QualifiedTable, signal?: AbortSignal): Promise<void> {
    const t = await describeTable(c, table, { publications: options.publications ?? [] });
    requireKey(t);
    let entry = progress.tables.find((x) => x.table === table)!;
    if (entry.status === 'pending' || entry.maxKey === null) {
      const maxKey = await maxKeyOf(c, t);
      await save(updateTable(progress, table, maxKey === null
        ? { status: 'done', maxKey: null, estimatedRows: t.estimatedRows }
        : { status: 'running', maxKey, estimatedRows: t.estimatedRows }));
      entry = progress.tables.find((x) => x.table === table)!;
      if (entry.status === 'done') return;
    }
    const maxKey = entry.maxKey!;
    let primed = false;
    let blocked = 0;
    /** The next chunk starts after the last chunk placed in the stream (its progress may not be saved yet). */
    let cursor = entry.lastKey;
    /** Chunks placed whose progress is not saved yet, oldest first. */
    const unsaved: Promise<void>[] = [];
    for (;;) {
      checkAbort(signal);
      while (unsaved.length > readAhead) await until(unsaved.shift()!, signal);
      const mark = (chunk: number) => ({ run, generation: progress.generation, table, chunk });
      if (!primed) {
        // Priming low watermark: gives the window history of this table before the first real chunk.
        await emitWatermark(c, encodeWatermark({ kind: 'low', ...mark(++chunkSeq), keyColumns: t.keyColumns }));
        primed = true;
      }
      const chunk = ++chunkSeq;
      await emitWatermark(c, encodeWatermark({ kind: 'low', ...mark(chunk), keyColumns: t.keyColumns }));
      const { rows, snapshot } = await selectChunk(c, t, cursor, maxKey);
      const data: SnapshotChunk = {
        run, generation: progress.generation, table, chunk,
        keyColumns: t.keyColumns,
        rows: rows.map((texts) => {
          const after = decodeRow(t, texts);
          return { after, key: keyOfRow(t, after) };
        }),
        lastKey: rows.length > 0 ? keyTextOf(t, rows[rows.length - 1]!) : cursor,
        tableDone: rows.length < chunkSize,
        snapshot,
      };
      inner.addChunk(data);
      await options.onChunkSelected?.(data);
      // Waiting before the high watermark is written: the stream may place the chunk before the write returns.
      const placement = new Promise<Placed>((resolve) => {
        placing = { chunk, resolve };
      });
      let outcome: ChunkSummary;
      let saved: Promise<void> | null;
      try {
        await emitWatermark(c, encodeWatermark({ kind: 'high', run, generation: progress.generation, table, chunk }));
        ({ outcome, saved } = await until(placement, signal));
      } finally {
        placing = null;
      }
      if (outcome.retry) {
        blocked += 1;
        if (blocked > maxRetries) {
          throw new SnapshotError('SNAPSHOT_CHUNK_BLOCKED', `the chunk of ${table} after key ${JSON.stringify(cursor)} cannot be placed in the stream: transaction(s) ${outcome.blockedBy.join(', ')} are committed in the WAL but still not visible to new snapshots (waiting for a synchronous standby?) after ${maxRetries} attempts`, { table, lastKey: cursor, xids: outcome.blockedBy, generation: progress.generation });
        }
        options.onRetry?.(outcome, blocked);
        await new Promise((r) => setTimeout(r, Math.min(retryDelayMs * 2 ** (blocked - 1), 5_000)));
        continue;
      }
      blocked = 0;
      unsaved.push(saved!);
      cursor = data.lastKey;
      if (data.tableDone) break;
    }
    for (const saved of unsaved) await until(saved, signal);
  }

  return {
    window,
    progress: () => progress,
    async run(signal) {
      const c = await connect();
      for (const entry of progress.tables) {
        if (entry.status === 'done') continue;
        await readTable(c, entry.table, signal);
      }
      if (!isSnapshotFinished(progress)) throw new Error('unreachable: tables left unfinished');
      return progress;
    },
    async chunkDurable(summary, covered) {
      if (summary.run !== run) return;
      const entry = progress.tables.find((t) => t.table === summary.table);
      if (!entry) return;
      // Each chunk counts once (a marker seen twice, e.g. by a careless caller, must not double rows).
      if (summary.chunk <= lastCounted) return;
      // Nothing was emitted for a `retry` chunk: progress stays; the reader reads the same range again.
      if (summary.retry) return;
      lastCounted = summary.chunk;
      const landing = landings.get(summary.chunk);
      landings.delete(summary.chunk);
      try {
        await save(updateTable(progress, summary.table, {
          status: summary.tableDone ? 'done' : 'running',
          lastKey: summary.lastKey,
          rowsDone: entry.rowsDone + summary.selected,
          chunksDone: entry.chunksDone + 1,
        }), covered);
      } catch (error) {
        landing?.reject(error);
        throw error;
      }
      options.onProgress?.(progress, summary);
      landing?.resolve();
    },
    async close() {
      closed = true;
      stop();
      const c = client;
      client = null;
      await c?.end().catch(() => undefined);
    },
  };
}
