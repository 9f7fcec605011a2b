/**
 * `reconcile`: does the destination say what the source says, at one consistent cut, without
 * stopping the line? (docs/reconcile.md). Takes the cut (a temporary slot's exported snapshot),
 * waits until the assembler's checkpoint has passed it, then reads both sides once — the
 * reconcilers' tables (COPY in key order) and their streams' events (`$all`, filtered by prefix)
 * — into key ranges on disk, and compares range by range: hashes first, entities only where the
 * hashes differ.
 */
import { tmpdir } from 'node:os';
import { KurrentDBClient } from '@kurrent/kurrentdb-client';
import type pg from 'pg';
import { readerConnectionString } from '../sink/index.js';
import { compareRange, destinationSum, foldRange, type FoldedEntity } from './compare.js';
import { takeCut, waitForCheckpoint } from './cut.js';
import type { AnyReconciler } from './define-reconciler.js';
import { ReconcileError } from './errors.js';
import { RangeFiles, RangeSums } from './ranges.js';
import { reconcileSample } from './sample.js';
import { sourceTable, type SourceTable } from './source-rows.js';
import { spillDestination, spillSource } from './spill.js';
import { finish } from './report.js';
import type { Compared, Differences, ReconcileOptions, ReconcileProgress, ReconcileReport } from './types.js';

/** The reconcilers `only` names (by name or table), all without it. */
export function selectReconcilers(reconcilers: readonly AnyReconciler[], only: readonly string[] | undefined): AnyReconciler[] {
  if (!only || only.length === 0) return [...reconcilers];
  return only.map((name) => {
    const found = reconcilers.find((r) => r.name === name || r.table === name);
    if (!found) {
      throw new ReconcileError('RECONCILE_UNKNOWN_RECONCILER', `no reconciler is named (or reads table) "${name}"; defined: ${reconcilers.map((r) => r.name).join(', ') || 'none'}`, { name, defined: reconcilers.map((r) => r.name) });
    }
    return found;
  });
}

async function describeAll(client: pg.ClientBase, reconcilers: readonly AnyReconciler[], publications: readonly string[]): Promise<SourceTable[]> {
  const tables: SourceTable[] = [];
  for (const r of reconcilers) tables.push(await sourceTable(client, r, publications));
  return tables;
}

/** Reconciles the destination against the source (see the module comment). Differences are the report, not errors. */
export async function reconcile(options: ReconcileOptions): Promise<ReconcileReport> {
  const started = Date.now();
  const reconcilers = selectReconcilers(options.reconcilers, options.only);
  const progress = (p: ReconcileProgress) => options.onProgress?.(p);
  progress({ phase: 'cut', done: 0, total: null });
  const cut = await takeCut(options.source.connection);
  const kurrent = KurrentDBClient.connectionString(readerConnectionString(options.destination.connectionString));
  let client: pg.Client | null = null;
  try {
    client = await cut.open();
    const tables = await describeAll(client, reconcilers, options.source.publications ?? []);
    const waited = await waitForCheckpoint(kurrent, options.assembler, cut.lsn, options.waitTimeoutMs ?? 60_000);
    const cutReport = { lsn: cut.lsn, checkpointLsn: waited.checkpointLsn, waitedMs: waited.waitedMs };
    const show = options.show ?? 20;
    if (options.sample !== undefined) {
      const sampled = await reconcileSample({ client, kurrent, reconcilers, tables, cut: cut.lsn, rows: options.sample, progress });
      return finish(started, cutReport, options.sample, reconcilers, sampled, show, { total: 0, differing: 0 });
    }
    const estimated = tables.reduce((sum, t) => sum + t.estimatedRows, 0);
    const ranges = Math.max(1, Math.ceil(estimated / (options.rangeSize ?? 50_000)));
    const parent = options.spillDir ?? tmpdir();
    const destination = await RangeFiles.create(parent, 'destination', ranges);
    const source = await RangeFiles.create(parent, 'source', ranges);
    try {
      const sums = new RangeSums(ranges);
      const [events, rows] = await Promise.all([
        spillDestination(kurrent, reconcilers, cut.lsn, destination, progress),
        spillSource(client, reconcilers, tables, source, sums, progress),
      ]);
      const compared = await compareRanges(reconcilers, destination, source, sums, progress);
      return finish(started, cutReport, null, reconcilers, { ...compared, rows, events }, show, compared.ranges);
    } finally {
      await Promise.all([destination.remove(), source.remove()]);
    }
  } finally {
    await client?.end().catch(() => undefined);
    await cut.close();
    await kurrent.dispose().catch(() => undefined);
  }
}

async function compareRanges(
  reconcilers: readonly AnyReconciler[], destination: RangeFiles, source: RangeFiles, sums: RangeSums, progress: (p: ReconcileProgress) => void,
): Promise<Omit<Compared, 'rows' | 'events'> & { ranges: { total: number; differing: number } }> {
  const differences: Differences = { missing: [], extra: [], different: [], deletedButAlive: [] };
  const entities = reconcilers.map(() => 0);
  const agreeing = reconcilers.map(() => 0);
  let differing = 0;
  for (let range = 0; range < destination.ranges; range++) {
    const folded: Map<string, FoldedEntity> = foldRange(await destination.lines(range), reconcilers);
    for (const entity of folded.values()) if (entity.state !== null) entities[entity.reconciler]! += 1;
    const own = destinationSum(folded);
    if (own.sum === sums.sums[range] && own.count === sums.counts[range]) {
      for (const entity of folded.values()) if (entity.state !== null && !entity.deleted) agreeing[entity.reconciler]! += 1;
    } else {
      differing += 1;
      const outcome = compareRange(await source.lines(range), folded, reconcilers);
      differences.missing.push(...outcome.missing);
      differences.extra.push(...outcome.extra);
      differences.different.push(...outcome.different);
      differences.deletedButAlive.push(...outcome.deletedButAlive);
      outcome.agreeing.forEach((n, r) => (agreeing[r]! += n));
    }
    progress({ phase: 'compare', done: range + 1, total: destination.ranges });
  }
  return { ...differences, entities, agreeing, ranges: { total: destination.ranges, differing } };
}
