// Options and the report of `reconcile` (docs/reconcile.md).
import type pg from 'pg';
import type { Lsn } from '../source/types.js';
import type { AnyReconciler } from './define-reconciler.js';

export interface ReconcileOptions {
  /** The assembler's name (its checkpoint stream tells how far the destination is durable). */
  readonly assembler: string;
  readonly source: {
    /** The capture role (LOGIN REPLICATION + SELECT): the cut is a temporary slot's exported snapshot. */
    readonly connection: string | pg.ClientConfig;
    /** The capture's publication(s): rows their row filters leave out are not expected. Default: none. */
    readonly publications?: readonly string[];
  };
  readonly destination: { readonly connectionString: string };
  readonly reconcilers: readonly AnyReconciler[];
  /** Reconcilers to run, by name or table. Default: all. */
  readonly only?: readonly string[];
  /** Check this many sampled rows per table instead of everything (extras are then not looked for). Default: all rows. */
  readonly sample?: number;
  /** Longest wait for the assembler's checkpoint to pass the cut. Default: 60 000 ms. */
  readonly waitTimeoutMs?: number;
  /** Entities listed per kind of difference in the report (the counts are always whole). Default: 20. */
  readonly show?: number;
  /** Entities per key range (the unit hashed on both sides and held in memory at once). Default: 50 000. */
  readonly rangeSize?: number;
  /** Directory for the key ranges' spill files (removed afterwards). Default: the OS temp dir. */
  readonly spillDir?: string;
  /** Called as work advances (a progress bar on a terminal). */
  readonly onProgress?: (progress: ReconcileProgress) => void;
}

export interface ReconcileProgress {
  readonly phase: 'cut' | 'destination' | 'source' | 'compare';
  /** What is counted: events read, rows read, ranges compared. */
  readonly done: number;
  /** `null` when unknown. */
  readonly total: number | null;
  readonly table?: string;
}

/** One compared field. Values are masked (`"•••"`) for the reconciler's `mask` fields. */
export interface FieldDifference {
  readonly field: string;
  readonly expected: unknown;
  readonly actual: unknown;
}

export interface EntityRef {
  readonly reconciler: string;
  readonly stream: string;
  /** The row's primary key, when the reconciler reads its columns (else omitted). */
  readonly key?: Readonly<Record<string, unknown>>;
}

export interface ReconcilerSummary {
  readonly reconciler: string;
  readonly table: string;
  readonly rows: number;
  /** Entity streams with a folded state in the cut (deleted ones included). */
  readonly entities: number;
  readonly agreeing: number;
  readonly missing: number;
  readonly extra: number;
  readonly different: number;
  readonly deletedButAlive: number;
}

export interface ReconcileReport {
  readonly version: 1;
  /** True when nothing is missing, extra, different or deleted-but-alive. */
  readonly ok: boolean;
  readonly cut: {
    /** The snapshot's consistent point: source rows as of just before it; events of commits before it. */
    readonly lsn: Lsn;
    /** The assembler's durable checkpoint when the destination was read (at or past `lsn`). */
    readonly checkpointLsn: Lsn;
    readonly waitedMs: number;
  };
  /** Rows sampled per table, or `null` for a full reconciliation. */
  readonly sample: number | null;
  readonly summaries: readonly ReconcilerSummary[];
  /** Key ranges compared, and those whose hashes differed (only those were compared entity by entity). Sampling: 0, 0. */
  readonly ranges: { readonly total: number; readonly differing: number };
  /** Source rows whose entity has no events in the cut. */
  readonly missing: readonly EntityRef[];
  /** Entity streams alive in the cut without a source row (and without a delete event). */
  readonly extra: readonly EntityRef[];
  /** Both sides present, some field differs. */
  readonly different: readonly (EntityRef & { readonly fields: readonly FieldDifference[] })[];
  /** The events say deleted; the source row is there. */
  readonly deletedButAlive: readonly EntityRef[];
  /** Events read from the destination (all in the cut or not), and those folded. */
  readonly events: { readonly read: number; readonly folded: number };
  readonly durationMs: number;
}

/** The differences found (whole lists; the report shows the first of each). */
export interface Differences {
  readonly missing: EntityRef[];
  readonly extra: EntityRef[];
  readonly different: (EntityRef & { readonly fields: readonly FieldDifference[] })[];
  readonly deletedButAlive: EntityRef[];
}

/** What a comparison (full or sampled) found, per reconciler where counted. */
export interface Compared extends Differences {
  readonly rows: readonly number[];
  readonly entities: readonly number[];
  readonly agreeing: readonly number[];
  readonly events: { readonly read: number; readonly folded: number };
}
