/**
 * `--sample N`: a quick statistical check. About N random rows per table at the cut, each
 * entity's stream read on its own (a stream read already hides truncated and deleted events) and
 * folded up to the cut. Extras cannot be found this way (no row to start from): a full run finds them.
 */
import { FORWARDS, START, type KurrentDBClient } from '@kurrent/kurrentdb-client';
import type pg from 'pg';
import type { Lsn } from '../source/types.js';
import { fieldDifferences } from './compare.js';
import type { AnyReconciler, EntityState, ReconcileEvent } from './define-reconciler.js';
import { inCut, toReconcileEvent } from './destination-events.js';
import { callReconciler } from './errors.js';
import { canonicalJson } from './ranges.js';
import { sourceRows, type SourceTable } from './source-rows.js';
import { sourceLine } from './spill.js';
import type { Compared, EntityRef, ReconcileProgress } from './types.js';

const CONCURRENT_READS = 8;

async function streamEvents(kurrent: KurrentDBClient, stream: string): Promise<ReconcileEvent[]> {
  const events: ReconcileEvent[] = [];
  try {
    for await (const resolved of kurrent.readStream(stream, { direction: FORWARDS, fromRevision: START })) {
      const e = resolved.event;
      if (e) events.push(toReconcileEvent(stream, e.type, e.data, e.metadata));
    }
  } catch (error) {
    const type = (error as { type?: unknown }).type;
    if (type === 'stream-not-found' || type === 'stream-deleted') return [];
    throw error;
  }
  return events;
}

function foldStream(reconciler: AnyReconciler, events: readonly ReconcileEvent[], cut: Lsn): EntityState | null {
  let state: EntityState | null = null;
  for (const event of events) {
    if (!inCut(event.metadata, cut)) continue;
    const before: EntityState | null = state;
    state = callReconciler(reconciler, `fold (event ${event.type})`, event.stream, (): EntityState | null => reconciler.fold(before, event));
  }
  return state;
}

export async function reconcileSample(input: {
  readonly client: pg.ClientBase;
  readonly kurrent: KurrentDBClient;
  readonly reconcilers: readonly AnyReconciler[];
  readonly tables: readonly SourceTable[];
  readonly cut: Lsn;
  readonly rows: number;
  readonly progress: (p: ReconcileProgress) => void;
}): Promise<Compared> {
  const { reconcilers, cut } = input;
  const out: Compared = { missing: [], extra: [], different: [], deletedButAlive: [], rows: reconcilers.map(() => 0), entities: reconcilers.map(() => 0), agreeing: reconcilers.map(() => 0), events: { read: 0, folded: 0 } };
  const rows = out.rows as number[];
  const entities = out.entities as number[];
  const agreeing = out.agreeing as number[];
  let read = 0;
  for (let r = 0; r < reconcilers.length; r++) {
    const reconciler = reconcilers[r]!;
    for await (const batch of sourceRows(input.client, input.tables[r]!, input.rows)) {
      for (let i = 0; i < batch.length; i += CONCURRENT_READS) {
        await Promise.all(batch.slice(i, i + CONCURRENT_READS).map(async (row) => {
          const { stream, canonical, line } = sourceLine(reconcilers, r, input.tables[r]!, row);
          const events = await streamEvents(input.kurrent, stream);
          read += events.length;
          const state = foldStream(reconciler, events, cut);
          const ref: EntityRef = line[3] === null ? { reconciler: reconciler.name, stream } : { reconciler: reconciler.name, stream, key: line[3] };
          if (state === null) return void out.missing.push(ref);
          entities[r]! += 1;
          if (reconciler.deleted && callReconciler(reconciler, 'deleted', stream, () => reconciler.deleted!(state))) out.deletedButAlive.push(ref);
          else if (canonicalJson(state) === canonical) agreeing[r]! += 1;
          else out.different.push({ ...ref, fields: fieldDifferences(reconciler, JSON.parse(canonical) as EntityState, state) });
        }));
      }
      rows[r]! += batch.length;
      input.progress({ phase: 'source', done: rows[r]!, total: input.rows, table: reconciler.table });
    }
  }
  return { ...out, events: { read, folded: read } };
}
