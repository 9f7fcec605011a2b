// The two passes that fill the key ranges: the destination's records (in the cut) and the
// source's rows (each with its expected state, summed into the range's hash).
import type { KurrentDBClient } from '@kurrent/kurrentdb-client';
import type pg from 'pg';
import type { Lsn } from '../source/types.js';
import { FOLD_METADATA_KEYS, type DestinationLine, type SourceLine } from './compare.js';
import type { AnyReconciler } from './define-reconciler.js';
import { destinationRecords, inCut } from './destination-events.js';
import { callReconciler, ReconcileError } from './errors.js';
import { canonicalJson, entityHash, rangeOf, type RangeFiles, type RangeSums } from './ranges.js';
import { sourceRows, type SourceTable } from './source-rows.js';
import type { ReconcileProgress } from './types.js';

/** The reconciler whose prefix is the longest one `stream` starts with (-1: none). */
export function reconcilerOf(reconcilers: readonly AnyReconciler[], stream: string): number {
  let best = -1;
  for (let i = 0; i < reconcilers.length; i++) {
    const prefix = reconcilers[i]!.streamPrefix;
    if (stream.startsWith(prefix) && (best < 0 || prefix.length > reconcilers[best]!.streamPrefix.length)) best = i;
  }
  return best;
}

function foldMetadata(metadata: Readonly<Record<string, string>>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const key of FOLD_METADATA_KEYS) if (metadata[key] !== undefined) kept[key] = metadata[key]!;
  return kept;
}

/** Spills every record of the reconcilers' streams in the cut to its range. Returns the events read and kept. */
export async function spillDestination(
  client: KurrentDBClient, reconcilers: readonly AnyReconciler[], cut: Lsn, files: RangeFiles, progress: (p: ReconcileProgress) => void,
): Promise<{ read: number; folded: number }> {
  let read = 0;
  let folded = 0;
  const prefixes = [...new Set(reconcilers.map((r) => r.streamPrefix))];
  for await (const record of destinationRecords(client, prefixes)) {
    const stream = record.kind === 'event' ? record.event.stream : record.stream;
    const r = reconcilerOf(reconcilers, stream);
    if (r < 0) continue;
    let line: DestinationLine;
    if (record.kind === 'event') {
      read += 1;
      if (read % 10_000 === 0) progress({ phase: 'destination', done: read, total: null });
      if (!inCut(record.event.metadata, cut)) continue;
      folded += 1;
      const e = record.event;
      line = ['e', r, stream, record.revision, e.type, e.version, e.data, foldMetadata(e.metadata)];
    } else {
      line = record.kind === 'truncate' ? ['t', r, stream, record.before] : ['x', r, stream];
    }
    const write = files.add(rangeOf(stream, files.ranges), JSON.stringify(line));
    if (write) await write;
  }
  await files.flush();
  progress({ phase: 'destination', done: read, total: read });
  return { read, folded };
}

/** The expected side of one row: its stream (checked against the prefix), canonical state and key. */
export function sourceLine(reconcilers: readonly AnyReconciler[], r: number, table: SourceTable, row: Record<string, unknown>): { stream: string; canonical: string; line: SourceLine } {
  const reconciler = reconcilers[r]!;
  const stream = callReconciler(reconciler, 'stream(row)', `a row of ${reconciler.table}`, () => reconciler.stream(row));
  if (typeof stream !== 'string' || !stream.startsWith(reconciler.streamPrefix) || reconcilerOf(reconcilers, stream) !== r) {
    throw new ReconcileError('RECONCILE_RECONCILER_INVALID', `reconciler ${reconciler.name}: stream(row) gave ${JSON.stringify(stream)}, which does not start with its streamPrefix ${JSON.stringify(reconciler.streamPrefix)} (or another reconciler's prefix is longer)`, {
      reconciler: reconciler.name,
      stream,
    });
  }
  const canonical = canonicalJson(callReconciler(reconciler, 'expected(row)', stream, () => reconciler.expected(row)));
  const key = table.keyColumns.length > 0 ? Object.fromEntries(table.keyColumns.map((k) => [k, row[k]])) : null;
  return { stream, canonical, line: [r, stream, canonical, key] };
}

const bigintsAsText = (_key: string, v: unknown) => (typeof v === 'bigint' ? v.toString() : v);

/** A replacer makes JSON.stringify several times slower: used only for keys that need it (bigint values, such as int8 or int8[] columns). */
function hasBigint(value: unknown): boolean {
  if (typeof value === 'bigint') return true;
  if (value === null || typeof value !== 'object') return false;
  for (const v of Object.values(value)) if (hasBigint(v)) return true;
  return false;
}

/** Scans each reconciler's table at the cut into the ranges, summing each range's hash. Returns rows per reconciler. */
export async function spillSource(
  client: pg.ClientBase, reconcilers: readonly AnyReconciler[], tables: readonly SourceTable[], files: RangeFiles, sums: RangeSums, progress: (p: ReconcileProgress) => void,
): Promise<number[]> {
  const rows = reconcilers.map(() => 0);
  for (let r = 0; r < reconcilers.length; r++) {
    const table = tables[r]!;
    for await (const batch of sourceRows(client, table)) {
      for (const row of batch) {
        const { stream, canonical, line } = sourceLine(reconcilers, r, table, row);
        const range = rangeOf(stream, files.ranges);
        sums.add(range, entityHash(stream, canonical));
        const write = files.add(range, JSON.stringify(line, hasBigint(line[3]) ? bigintsAsText : undefined));
        if (write) await write;
      }
      rows[r]! += batch.length;
      progress({ phase: 'source', done: rows[r]!, total: table.estimatedRows || null, table: reconcilers[r]!.table });
    }
  }
  await files.flush();
  return rows;
}
