/**
 * Ad hoc snapshots: re-read chosen tables while streaming, as a new generation (an operator
 * asks for it, e.g. after fixing a mapper). They run as incremental snapshots, so streaming
 * never stops and the watermark window keeps the result consistent with the stream.
 */
import type { QualifiedTable } from '../types.js';
import { SnapshotError, splitTable } from './catalog.js';
import { nextGeneration } from './modes.js';
import { newSnapshotProgress, type SnapshotProgress } from './progress.js';

export function adHocSnapshotProgress(options: {
  readonly tables: readonly QualifiedTable[];
  /** Tables captured by this assembler; ad hoc tables must be among them. */
  readonly capturedTables: readonly QualifiedTable[];
  readonly lastGeneration: string | null;
  readonly reason?: string;
  readonly now?: Date;
  /** The request (`event-assembler snapshot`) that asked for it. */
  readonly request?: { readonly id: string; readonly lsn: string };
}): SnapshotProgress {
  if (options.tables.length === 0) throw new SnapshotError('SNAPSHOT_NO_TABLES', 'an ad hoc snapshot needs at least one table', { field: 'tables' });
  for (const t of options.tables) {
    splitTable(t);
    if (!options.capturedTables.includes(t)) {
      throw new SnapshotError('SNAPSHOT_TABLE_NOT_CAPTURED', `table ${t} is not captured by this assembler (captured: ${options.capturedTables.join(', ')})`, { table: t });
    }
  }
  const generation = nextGeneration(options.lastGeneration);
  return newSnapshotProgress({
    generation, kind: 'ad_hoc', mode: 'ad_hoc', tables: [...new Set(options.tables)],
    reason: options.reason ?? `ad hoc snapshot of ${options.tables.join(', ')} requested`,
    ...(options.now ? { now: options.now } : {}),
    ...(options.request ? { request: { id: options.request.id, lsn: options.request.lsn } } : {}),
  });
}
