/**
 * Durable snapshot progress: which generation, which tables are done, and for the table being
 * read the key of the last chunk whose records are durable downstream — the point a restarted
 * snapshot resumes after. Saved after each chunk (never before its records are durable).
 *
 * The pipeline stores it next to the source checkpoint in KurrentDB; {@link createFileProgressStore}
 * is the file implementation (atomic replace: temp file, fsync, rename, fsync of the directory).
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { Lsn, QualifiedTable } from '../types.js';
import { SnapshotError, type KeyText } from './catalog.js';

export type SnapshotKind = 'initial' | 'incremental' | 'ad_hoc';
export type TableStatus = 'pending' | 'running' | 'done';

export interface TableProgress {
  readonly table: QualifiedTable;
  readonly status: TableStatus;
  /** Key (PostgreSQL text form per key column) of the last row of the last durable chunk; `null` before the first. */
  readonly lastKey: KeyText | null;
  /** Incremental only: the table's largest key when its snapshot started; chunks stop there (later rows come from the stream). */
  readonly maxKey: KeyText | null;
  readonly rowsDone: number;
  /** `pg_class.reltuples` when the table started; `null` if never analyzed. */
  readonly estimatedRows: number | null;
  readonly chunksDone: number;
}

export interface SnapshotProgress {
  /** Format version of this record. */
  readonly version: 1;
  readonly generation: string;
  readonly kind: SnapshotKind;
  /** Mode that started it (`initial`, `when_needed`, `initial_only`, `ad_hoc`). */
  readonly mode: string;
  /** Initial snapshots: the slot and its consistent point (streaming starts there). */
  readonly slot: string | null;
  readonly consistentPoint: Lsn | null;
  /** Why this generation exists (from the snapshot decision). */
  readonly reason: string;
  readonly startedAt: string;
  readonly updatedAt: string;
  readonly tables: readonly TableProgress[];
  /** Ad hoc snapshots: the request that started this generation (its id and the LSN of its message). Absent otherwise. */
  readonly request?: { readonly id: string; readonly lsn: Lsn } | null;
}

const keyText = z.array(z.string()).nullable();
const progressSchema = z.object({
  version: z.literal(1),
  generation: z.string().min(1),
  kind: z.enum(['initial', 'incremental', 'ad_hoc']),
  mode: z.string(),
  slot: z.string().nullable(),
  consistentPoint: z.string().nullable(),
  reason: z.string(),
  startedAt: z.string(),
  updatedAt: z.string(),
  tables: z.array(z.object({
    table: z.string(),
    status: z.enum(['pending', 'running', 'done']),
    lastKey: keyText,
    maxKey: keyText,
    rowsDone: z.number().int().min(0),
    estimatedRows: z.number().nullable(),
    chunksDone: z.number().int().min(0),
  })),
  request: z.object({ id: z.string(), lsn: z.string() }).nullable().optional(),
});

/** Validates a stored record; throws naming the field. */
export function parseSnapshotProgress(value: unknown): SnapshotProgress {
  const r = progressSchema.safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new SnapshotError('SNAPSHOT_PROGRESS_INVALID', `stored snapshot progress is invalid at "${issue?.path.join('.') ?? ''}": ${issue?.message ?? ''}`, { field: issue?.path.join('.') });
  }
  return r.data as SnapshotProgress;
}

export function newSnapshotProgress(init: {
  generation: string; kind: SnapshotKind; mode: string; tables: readonly QualifiedTable[];
  reason: string; slot?: string | null; consistentPoint?: Lsn | null; now?: Date; request?: { id: string; lsn: Lsn } | null;
}): SnapshotProgress {
  const now = (init.now ?? new Date()).toISOString();
  return {
    version: 1, generation: init.generation, kind: init.kind, mode: init.mode,
    slot: init.slot ?? null, consistentPoint: init.consistentPoint ?? null, reason: init.reason,
    startedAt: now, updatedAt: now,
    ...(init.request ? { request: init.request } : {}),
    tables: init.tables.map((table) => ({ table, status: 'pending', lastKey: null, maxKey: null, rowsDone: 0, estimatedRows: null, chunksDone: 0 })),
  };
}

/** Returns a copy with `table`'s entry changed. */
export function updateTable(progress: SnapshotProgress, table: QualifiedTable, change: Partial<Omit<TableProgress, 'table'>>, now = new Date()): SnapshotProgress {
  let found = false;
  const tables = progress.tables.map((t) => {
    if (t.table !== table) return t;
    found = true;
    return { ...t, ...change };
  });
  if (!found) throw new RangeError(`table ${table} is not part of snapshot generation ${progress.generation}`);
  return { ...progress, tables, updatedAt: now.toISOString() };
}

export function isSnapshotFinished(progress: SnapshotProgress): boolean {
  return progress.tables.every((t) => t.status === 'done');
}

export interface SnapshotProgressStore {
  /** The saved progress, or `null` when none was saved. */
  load(): Promise<SnapshotProgress | null>;
  /**
   * Replaces the saved progress durably (returns after it would survive a crash). `covered`: what
   * the caller holds for records this progress now covers (the pipeline's pins), to be dropped in
   * the same save — never in a save of older progress. Stores that keep nothing else ignore it.
   */
  save(progress: SnapshotProgress, covered?: readonly string[]): Promise<void>;
}

/** Progress in one JSON file, replaced atomically. */
export function createFileProgressStore(file: string): SnapshotProgressStore {
  return {
    async load() {
      let text: string;
      try {
        text = await fs.readFile(file, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (error) {
        throw new SnapshotError('SNAPSHOT_PROGRESS_INVALID', `snapshot progress file ${file} is not JSON`, { file }, { cause: error });
      }
      return parseSnapshotProgress(json);
    },
    async save(progress) {
      const dir = path.dirname(file);
      const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
      const handle = await fs.open(tmp, 'w', 0o600);
      try {
        await handle.writeFile(`${JSON.stringify(progress, null, 2)}\n`, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      try {
        await fs.rename(tmp, file);
      } catch (error) {
        await fs.rm(tmp, { force: true });
        throw error;
      }
      // The rename itself must reach the disk: fsync the directory entry.
      const d = await fs.open(dir, 'r');
      try {
        await d.sync();
      } finally {
        await d.close();
      }
    },
  };
}

/** An in-memory store (tests, and the pipeline before its KurrentDB store exists). */
export function createMemoryProgressStore(initial: SnapshotProgress | null = null): SnapshotProgressStore & { readonly saved: SnapshotProgress[] } {
  let current = initial;
  const saved: SnapshotProgress[] = [];
  return {
    saved,
    load: () => Promise.resolve(current),
    save(p) {
      current = p;
      saved.push(p);
      return Promise.resolve();
    },
  };
}
