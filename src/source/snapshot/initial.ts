/**
 * The initial snapshot: the handoff between "rows that already exist" and the change stream
 * (DESIGN.md invariant 1). The slot is created with an exported snapshot; every captured table
 * is read at exactly that snapshot; streaming then starts at the slot's `consistent_point`.
 * A row committed before the slot is in the snapshot and not in the stream; a row committed
 * after is in the stream and not in the snapshot — no gap, no overlap, no timestamps.
 *
 * The exported snapshot lives only while the replication connection that created it stays
 * open and runs no other command, so {@link createSlotWithSnapshot} returns a handle that keeps
 * it open until `close()`. Each reading connection imports it (`SET TRANSACTION SNAPSHOT`) in a
 * REPEATABLE READ READ ONLY transaction; with `parallelism > 1` several connections import the
 * same snapshot and read different tables.
 */
import pg from 'pg';
import type { Lsn, QualifiedTable, SnapshotRecord } from '../types.js';
import {
  describeTable, keyOfRow, keyTextOf, decodeRow, orderBy, rowFilterClause, selectList, SnapshotError,
  type KeyText, type SnapshotTable,
} from './catalog.js';
import { copyOut } from './copy.js';
import { newSnapshotProgress, updateTable, type SnapshotProgress, type SnapshotProgressStore } from './progress.js';
import { connectSource } from '../connect-source.js';
import { supportsFailoverSlots } from '../failover-state.js';

export interface ExportedSnapshotSlot {
  readonly slot: string;
  /** Where streaming starts: the first change not contained in the snapshot. */
  readonly consistentPoint: Lsn;
  /** Name to pass to `SET TRANSACTION SNAPSHOT`; valid until {@link close}. */
  readonly snapshotName: string;
  readonly outputPlugin: string;
  /** Ends the replication connection; the exported snapshot is gone afterwards (the slot stays). */
  close(): Promise<void>;
}

export interface CreateSlotWithSnapshotOptions {
  /** Capture role connection (LOGIN REPLICATION): a connection string or `pg` settings. */
  readonly connection: string | pg.ClientConfig;
  readonly slot: string;
  /** Output plugin. Default: `pgoutput`. */
  readonly plugin?: string;
  /**
   * PostgreSQL 17 failover slot (synchronized to standbys with `sync_replication_slots = on`).
   * Default: true where the server supports it (17+), unless the slot is temporary (those cannot be).
   */
  readonly failover?: boolean;
  /** A temporary slot: dropped by the server when the connection ends (a reconciliation's cut). Default: false. */
  readonly temporary?: boolean;
}

function clientConfig(connection: string | pg.ClientConfig): pg.ClientConfig {
  return typeof connection === 'string' ? { connectionString: connection } : connection;
}

/**
 * `CREATE_REPLICATION_SLOT <slot> LOGICAL pgoutput (SNAPSHOT 'export')` on a replication
 * connection that is kept open (and idle) until `close()`.
 */
export async function createSlotWithSnapshot(options: CreateSlotWithSnapshotOptions): Promise<ExportedSnapshotSlot> {
  if (!/^[a-z0-9_]{1,63}$/.test(options.slot)) {
    throw new SnapshotError('SNAPSHOT_SLOT_NAME_INVALID', `slot name "${options.slot}" must be lower-case letters, digits and _ (at most 63)`, { slot: options.slot });
  }
  const plugin = options.plugin ?? 'pgoutput';
  const client = await connectSource(clientConfig(options.connection), { extra: { replication: 'database' } });
  try {
    const failover = options.failover ?? (!options.temporary && (await supportsFailoverSlots(client)));
    const flags = [`SNAPSHOT 'export'`, ...(failover ? ['FAILOVER'] : [])].join(', ');
    const result = await client.query<{ slot_name: string; consistent_point: string; snapshot_name: string; output_plugin: string }>(
      `CREATE_REPLICATION_SLOT ${options.slot}${options.temporary ? ' TEMPORARY' : ''} LOGICAL ${plugin} (${flags})`,
    );
    const row = result.rows[0];
    if (!row?.snapshot_name) throw new SnapshotError('SNAPSHOT_EXPORT_FAILED', `the server created slot ${options.slot} but exported no snapshot`, { slot: options.slot });
    let closed: Promise<void> | null = null;
    return {
      slot: row.slot_name,
      consistentPoint: row.consistent_point,
      snapshotName: row.snapshot_name,
      outputPlugin: row.output_plugin,
      close() {
        closed ??= client.end().catch(() => undefined);
        return closed;
      },
    };
  } catch (error) {
    await client.end().catch(() => undefined);
    throw error;
  }
}

export type SnapshotReadMethod = 'copy' | 'cursor';

/** A batch of snapshot records of one table, in primary-key order. */
export interface SnapshotBatch {
  readonly table: QualifiedTable;
  readonly records: readonly SnapshotRecord[];
  /** Text form of the last record's key (what progress stores); `null` for a table without key or an empty batch. */
  readonly lastKey: KeyText | null;
  /** Rows of this table read so far, this batch included. */
  readonly rowsDone: number;
  readonly estimatedRows: number | null;
  /** True on the table's last batch (which may be empty). */
  readonly tableDone: boolean;
}

export interface ReadSnapshotOptions {
  /** Capture role connection (SELECT on the tables); a plain connection, not a replication one. */
  readonly connection: string | pg.ClientConfig;
  /** From {@link createSlotWithSnapshot}. */
  readonly snapshotName: string;
  readonly tables: readonly QualifiedTable[];
  readonly snapshotGeneration: string;
  /** Connections reading tables at the same time, each importing the snapshot. Default: 1. */
  readonly parallelism?: number;
  /**
   * Stamped on every record as its `snapshotKind` (the pipeline passes `initial`, so that a record
   * need not be copied to carry it). Default: none.
   */
  readonly snapshotKind?: SnapshotRecord['snapshotKind'];
  /** `copy` (COPY … TO STDOUT, text format) or `cursor` (DECLARE … CURSOR + FETCH). Default: `copy` (measured ~2× faster here, see docs/snapshots.md). */
  readonly method?: SnapshotReadMethod;
  /** Records per batch. Default: 1000. */
  readonly batchRows?: number;
  /**
   * The capture's publication(s): each table is read with their column list and row filter
   * (PostgreSQL 15+), so the snapshot holds only rows and columns the stream would. Default: none
   * (every row and column).
   */
  readonly publications?: readonly string[];
}

const SESSION_SETTINGS = `SET DateStyle = 'ISO, MDY'; SET IntervalStyle = 'postgres'; SET bytea_output = 'hex'`;

/** Opens a connection in a REPEATABLE READ READ ONLY transaction at `snapshotName`. */
export async function openSnapshotConnection(connection: string | pg.ClientConfig, snapshotName: string): Promise<pg.Client> {
  const client = await connectSource(clientConfig(connection));
  try {
    await client.query(SESSION_SETTINGS);
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await client.query(`SET TRANSACTION SNAPSHOT ${pg.escapeLiteral(snapshotName)}`);
    return client;
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new SnapshotError('SNAPSHOT_IMPORT_FAILED', `could not import snapshot ${snapshotName}: ${(error as Error).message} (the replication connection that exported it must stay open and idle)`, { snapshotName }, { cause: error });
  }
}

const TEXT_TYPES = { getTypeParser: () => (value: string) => value };

/** Reads one table in key order from a client whose transaction already holds the snapshot; yields raw text rows. */
async function* readTableText(client: pg.Client, t: SnapshotTable, method: SnapshotReadMethod, batchRows: number): AsyncGenerator<(string | null)[][]> {
  const order = t.keyColumns.length > 0 ? ` ORDER BY ${orderBy(t)}` : '';
  const select = `SELECT ${selectList(t)} FROM ${t.sql}${rowFilterClause(t)}${order}`;
  if (method === 'copy') {
    yield* copyOut(client, `COPY (${select}) TO STDOUT`, { batchRows });
    return;
  }
  const cursor = `ea_snapshot_${Math.random().toString(36).slice(2, 10)}`;
  await client.query(`DECLARE ${cursor} NO SCROLL CURSOR FOR ${select}`);
  for (;;) {
    const r = await client.query({ text: `FETCH ${batchRows} FROM ${cursor}`, rowMode: 'array', types: TEXT_TYPES });
    if (r.rows.length === 0) break;
    yield r.rows as (string | null)[][];
  }
  await client.query(`CLOSE ${cursor}`);
}

/** A row read as a snapshot record; with `kind`, the record carries it (`snapshotKind`). */
export function snapshotRecord(t: SnapshotTable, generation: string, texts: readonly (string | null)[], kind?: SnapshotRecord['snapshotKind']): SnapshotRecord {
  const after = decodeRow(t, texts);
  const key = keyOfRow(t, after);
  const change = { op: 'read', table: t.table, after, key, snapshotGeneration: generation } as const;
  return kind === undefined
    ? { kind: 'snapshot', snapshotGeneration: generation, table: t.table, change }
    : { kind: 'snapshot', snapshotGeneration: generation, snapshotKind: kind, table: t.table, change };
}

/**
 * Reads every table at the exported snapshot and yields batches of {@link SnapshotRecord}s,
 * each table in primary-key order (tables interleave when `parallelism > 1`). Memory holds at
 * most about `2 × parallelism` batches. Stopping the iteration early closes every connection.
 */
export async function* readInitialSnapshot(options: ReadSnapshotOptions): AsyncGenerator<SnapshotBatch> {
  const method = options.method ?? 'copy';
  const batchRows = options.batchRows ?? 1000;
  const workers = Math.max(1, Math.min(options.parallelism ?? 1, options.tables.length));
  const pending = [...options.tables];
  const queue: SnapshotBatch[] = [];
  const capacity = 2 * workers;
  let failure: unknown = null;
  let stopped = false;
  let running = workers;
  let wakeConsumer: (() => void) | null = null;
  const wakeProducers: (() => void)[] = [];
  const clients: pg.Client[] = [];
  const notifyConsumer = () => { const w = wakeConsumer; wakeConsumer = null; w?.(); };

  const put = async (batch: SnapshotBatch) => {
    while (queue.length >= capacity && !stopped) await new Promise<void>((r) => wakeProducers.push(r));
    if (stopped) throw new Error('snapshot read stopped');
    queue.push(batch);
    notifyConsumer();
  };

  const worker = async () => {
    const client = await openSnapshotConnection(options.connection, options.snapshotName);
    clients.push(client);
    try {
      for (let table = pending.shift(); table !== undefined && !stopped; table = pending.shift()) {
        const t = await describeTable(client, table, { publications: options.publications ?? [] });
        let rowsDone = 0;
        let lastKey: KeyText | null = null;
        for await (const rows of readTableText(client, t, method, batchRows)) {
          const records = rows.map((r) => snapshotRecord(t, options.snapshotGeneration, r, options.snapshotKind));
          rowsDone += rows.length;
          if (t.keyIndexes.length > 0 && rows.length > 0) lastKey = keyTextOf(t, rows[rows.length - 1]!);
          await put({ table, records, lastKey, rowsDone, estimatedRows: t.estimatedRows, tableDone: false });
        }
        await put({ table, records: [], lastKey, rowsDone, estimatedRows: t.estimatedRows, tableDone: true });
      }
      await client.query('COMMIT');
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  for (let i = 0; i < workers; i++) {
    worker()
      .catch((error: unknown) => {
        if (!stopped && failure === null) failure = error;
      })
      .finally(() => {
        running -= 1;
        notifyConsumer();
      });
  }

  try {
    for (;;) {
      const next = queue.shift();
      if (next) {
        wakeProducers.shift()?.();
        yield next;
        continue;
      }
      if (failure !== null) throw failure;
      if (running === 0) return;
      await new Promise<void>((r) => { wakeConsumer = r; });
    }
  } finally {
    stopped = true;
    for (const w of wakeProducers.splice(0)) w();
    // An abandoned COPY keeps its connection busy: ending the connections stops it server-side.
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  }
}

/** Flattens batches into records (for callers that need no per-batch progress). */
export async function* snapshotRecords(batches: AsyncIterable<SnapshotBatch>): AsyncGenerator<SnapshotRecord> {
  for await (const b of batches) yield* b.records;
}

export interface RunInitialSnapshotOptions extends Omit<ReadSnapshotOptions, 'snapshotName'> {
  /** Replication-capable capture role connection (LOGIN REPLICATION + SELECT). */
  readonly connection: string | pg.ClientConfig;
  /** Slot to create with an exported snapshot. */
  readonly slot: string;
  readonly store: SnapshotProgressStore;
  /** Mode and reason recorded in the progress (from the snapshot decision). Defaults: `initial`, `no stored position`. */
  readonly mode?: string;
  readonly reason?: string;
  /** Saves progress after at least this many rows of a table since its last save (and at each table's end). Default: 10 000. */
  readonly progressEveryRows?: number;
  /**
   * Hands a batch downstream; must resolve only when the batch is durable there (progress is
   * saved after it, so a crash never skips rows; it may repeat the rows of one batch).
   */
  deliver(batch: SnapshotBatch): Promise<void>;
  /** After each progress save (reporting). */
  readonly onProgress?: (progress: SnapshotProgress) => void;
}

export interface InitialSnapshotResult {
  readonly slot: string;
  /** Start streaming here. */
  readonly consistentPoint: Lsn;
  readonly progress: SnapshotProgress;
}

/**
 * The whole handoff: creates the slot with an exported snapshot, records the generation's
 * progress (slot and consistent point first, so an interrupted run can be resumed), reads
 * every table at the snapshot, delivers the batches and saves progress as they become
 * durable. Returns where streaming starts. After a crash, resume with an incremental
 * snapshot from the saved progress (see `decideSnapshot` and docs/snapshots.md).
 */
export async function runInitialSnapshot(options: RunInitialSnapshotOptions): Promise<InitialSnapshotResult> {
  const every = options.progressEveryRows ?? 10_000;
  const exported = await createSlotWithSnapshot({ connection: options.connection, slot: options.slot });
  try {
    let progress = newSnapshotProgress({
      generation: options.snapshotGeneration, kind: 'initial', mode: options.mode ?? 'initial', tables: options.tables,
      reason: options.reason ?? 'no stored position', slot: exported.slot, consistentPoint: exported.consistentPoint,
    });
    await options.store.save(progress);
    const savedAt = new Map<QualifiedTable, number>();
    for await (const batch of readInitialSnapshot({ ...options, snapshotName: exported.snapshotName })) {
      await options.deliver(batch);
      const last = savedAt.get(batch.table) ?? 0;
      if (batch.tableDone || batch.rowsDone - last >= every) {
        progress = updateTable(progress, batch.table, {
          status: batch.tableDone ? 'done' : 'running',
          lastKey: batch.lastKey, rowsDone: batch.rowsDone, estimatedRows: batch.estimatedRows,
          chunksDone: (progress.tables.find((t) => t.table === batch.table)?.chunksDone ?? 0) + 1,
        });
        await options.store.save(progress);
        savedAt.set(batch.table, batch.rowsDone);
        options.onProgress?.(progress);
      }
    }
    return { slot: exported.slot, consistentPoint: exported.consistentPoint, progress };
  } finally {
    await exported.close();
  }
}
