// Loading a generation: the projection's events of `$all` from position 0 up to the freshness
// point, read (a read ends, a subscription would not) and applied as the runner applies them —
// batches through applyRecovering (guards, receipts, entity versions, poison handling) — into the
// generation's schema under its state key, each partition under its own checkpoint row. The live
// entities the events leave are tallied on the way, for validation (rebuild-validate.ts).
import { BACKWARDS, END, FORWARDS, START, type KurrentDBClient } from '@kurrent/kurrentdb-client';
import { stateKey } from './apply-batch.js';
import { selects } from './define-projection.js';
import { ProjectionConflictError } from './errors.js';
import { filterOf } from './event-feed.js';
import { partitionKey, partitionOf } from './partition.js';
import { applyRecovering, emptyTotals, type BatchDeps, type Totals } from './poison.js';
import { recordedInput, toProjectionEvent } from './projection-event.js';
import { EntityTally } from './rebuild-validate.js';
import { advanceCheckpoint, atOrBelow } from './store.js';
import type { AllPosition, Projection, ProjectionEvent } from './types.js';

/** The position of the last event in `$all` (`null` when it is empty): the freshness point `'head'`. */
export async function headOf(kurrent: KurrentDBClient): Promise<AllPosition | null> {
  for await (const resolved of kurrent.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 })) {
    const position = resolved.event?.position;
    if (position) return { commit: position.commit, prepare: position.prepare };
  }
  return null;
}

/** What loading read and did. */
export interface LoadOutcome {
  /** Events the projection selected, up to the freshness point. */
  readonly read: number;
  readonly totals: Totals;
  readonly tally: EntityTally;
}

/** Called after each batch applied: events read so far, the position of the last one. */
export type LoadProgress = (read: number, position: AllPosition) => void;

/**
 * Loads the generation `deps.target` names (fresh: its checkpoints at nothing) with the events up
 * to `to` and leaves every partition's checkpoint at `to` — all of `$all` up to it was read, so a
 * runner on the generation goes on from there.
 */
export async function loadGeneration(kurrent: KurrentDBClient, deps: Omit<BatchDeps, 'totals'>, to: AllPosition | null, progress: LoadProgress = () => undefined): Promise<LoadOutcome> {
  const projection = deps.target.projection;
  const count = projection.partition.count;
  const parts: Projection<any>[] = Array.from({ length: count }, (_, index) => ({ ...projection, partition: { count, index } }));
  const totals = emptyTotals();
  const tally = new EntityTally(projection);
  const positions: (AllPosition | null)[] = parts.map(() => null);
  const pending: ProjectionEvent[][] = parts.map(() => []);
  const flush = async (p: number) => {
    const batch = pending[p]!.splice(0);
    positions[p] = await applyRecovering({ ...deps, totals, target: { ...deps.target, projection: parts[p]! } }, positions[p]!, batch);
  };
  let read = 0;
  if (to !== null) {
    for await (const resolved of kurrent.readAll({ fromPosition: START, direction: FORWARDS, filter: filterOf(projection) })) {
      deps.signal.throwIfAborted();
      const input = recordedInput(resolved);
      if (!input) continue;
      if (!atOrBelow(input.position, to)) break;
      const p = partitionOf(input.stream, count);
      if (!selects(parts[p]!, input.stream, input.type, p)) continue;
      const event = toProjectionEvent(input);
      read++;
      tally.see(event);
      pending[p]!.push(event);
      if (pending[p]!.length >= projection.batchSize) {
        await flush(p);
        progress(read, input.position);
      }
    }
    for (let p = 0; p < count; p++) {
      await flush(p);
      const partition = partitionKey(parts[p]!.partition);
      const at = positions[p]!;
      if ((at === null || at.commit !== to.commit || at.prepare !== to.prepare) && !(await advanceCheckpoint(deps.client, deps.target.tables, stateKey(deps.target), partition, at, to))) {
        throw new ProjectionConflictError(projection.name, partition, at, null);
      }
    }
  }
  return { read, totals, tally };
}
