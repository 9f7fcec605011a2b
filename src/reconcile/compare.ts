/**
 * One key range, both sides: the destination's records fold into each entity's state (only what a
 * stream read would show, only events in the cut — filtered when spilled), the entities' hashes
 * are summed, and when the sum differs from the source side's the range is compared entity by
 * entity.
 */
import type { AnyReconciler, EntityState, ReconcileEvent } from './define-reconciler.js';
import { callReconciler as call } from './errors.js';
import { canonicalJson, entityHash } from './ranges.js';
import type { EntityRef, FieldDifference } from './types.js';

/** A destination spill line: an event (in the cut), a truncation or a tombstone. */
export type DestinationLine =
  | readonly ['e', number, string, number, string, number | null, unknown, Record<string, string>] // reconciler, stream, revision, type, version, data, metadata
  | readonly ['t', number, string, number] // reconciler, stream, truncate before
  | readonly ['x', number, string]; // reconciler, stream (tombstone)

/** A source spill line: reconciler, stream, canonical expected state, key (or null). */
export type SourceLine = readonly [number, string, string, Record<string, unknown> | null];

/** Metadata keys kept for the fold (the rest is the sink's and the diagnosis's). */
export const FOLD_METADATA_KEYS = ['origin', 'source.commitLsn', 'source.commitTime', 'snapshot.generation', 'contract', 'entity.type', 'entity.id', 'receipt.kind'] as const;

export interface FoldedEntity {
  readonly reconciler: number;
  readonly state: EntityState | null;
  readonly deleted: boolean;
}

export interface RangeOutcome {
  readonly missing: EntityRef[];
  readonly extra: EntityRef[];
  readonly different: (EntityRef & { readonly fields: readonly FieldDifference[] })[];
  readonly deletedButAlive: EntityRef[];
  /** Per reconciler: entities with a state in the cut, and agreeing entities. */
  readonly entities: number[];
  readonly agreeing: number[];
  readonly matched: boolean;
}

/** Folds a range's destination lines into entity states (events hidden by `$tb` or a tombstone left out). */
export function foldRange(lines: readonly string[], reconcilers: readonly AnyReconciler[]): Map<string, FoldedEntity> {
  const perStream = new Map<string, { reconciler: number; events: { revision: number; event: ReconcileEvent }[]; before: number; tombstone: boolean }>();
  for (const text of lines) {
    const line = JSON.parse(text) as DestinationLine;
    const stream = line[2];
    let entry = perStream.get(stream);
    if (!entry) perStream.set(stream, (entry = { reconciler: line[1], events: [], before: 0, tombstone: false }));
    if (line[0] === 'e') entry.events.push({ revision: line[3], event: { stream, type: line[4], version: line[5], data: line[6], metadata: line[7] } });
    else if (line[0] === 't') entry.before = line[3];
    else entry.tombstone = true;
  }
  const folded = new Map<string, FoldedEntity>();
  for (const [stream, entry] of perStream) {
    const reconciler = reconcilers[entry.reconciler]!;
    let state: EntityState | null = null;
    if (!entry.tombstone) {
      for (const { revision, event } of entry.events) {
        if (revision < entry.before) continue;
        state = call(reconciler, `fold (event ${event.type} at revision ${revision})`, stream, () => reconciler.fold(state, event));
      }
    }
    const deleted = state !== null && reconciler.deleted !== undefined && call(reconciler, 'deleted', stream, () => reconciler.deleted!(state!));
    if (state !== null || entry.events.length > 0) folded.set(stream, { reconciler: entry.reconciler, state, deleted });
  }
  return folded;
}

/** The destination's sum of hashes over the range's alive entities (what the source side sums over its rows). */
export function destinationSum(folded: ReadonlyMap<string, FoldedEntity>): { sum: bigint; count: number } {
  let sum = 0n;
  let count = 0;
  for (const [stream, entity] of folded) {
    if (entity.state === null || entity.deleted) continue;
    sum = (sum + entityHash(stream, canonicalJson(entity.state))) & ((1n << 64n) - 1n);
    count += 1;
  }
  return { sum, count };
}

const MASKED = '•••';

/** Field by field (canonical JSON of each value), masked where the reconciler says. */
export function fieldDifferences(reconciler: AnyReconciler, expected: EntityState, actual: EntityState): FieldDifference[] {
  const mask = new Set<string>(reconciler.mask ?? []);
  const fields = [...new Set([...Object.keys(expected), ...Object.keys(actual)])].sort();
  const out: FieldDifference[] = [];
  for (const field of fields) {
    if (canonicalJson(expected[field]) === canonicalJson(actual[field])) continue;
    out.push(mask.has(field) ? { field, expected: MASKED, actual: MASKED } : { field, expected: expected[field] ?? null, actual: actual[field] ?? null });
  }
  return out;
}

/** Entity by entity: the range's source lines against its folded states. */
export function compareRange(sourceLines: readonly string[], folded: ReadonlyMap<string, FoldedEntity>, reconcilers: readonly AnyReconciler[]): Omit<RangeOutcome, 'matched' | 'entities'> {
  const outcome = { missing: [] as EntityRef[], extra: [] as EntityRef[], different: [] as (EntityRef & { fields: FieldDifference[] })[], deletedButAlive: [] as EntityRef[], agreeing: reconcilers.map(() => 0) };
  const seen = new Set<string>();
  for (const text of sourceLines) {
    const [r, stream, canonical, key] = JSON.parse(text) as SourceLine;
    const reconciler = reconcilers[r]!;
    const ref: EntityRef = key === null ? { reconciler: reconciler.name, stream } : { reconciler: reconciler.name, stream, key };
    seen.add(stream);
    const entity = folded.get(stream);
    if (!entity || entity.state === null) outcome.missing.push(ref);
    else if (entity.deleted) outcome.deletedButAlive.push(ref);
    else if (canonicalJson(entity.state) === canonical) outcome.agreeing[r]! += 1;
    else outcome.different.push({ ...ref, fields: fieldDifferences(reconciler, JSON.parse(canonical) as EntityState, entity.state) });
  }
  for (const [stream, entity] of folded) {
    if (seen.has(stream) || entity.state === null || entity.deleted) continue;
    outcome.extra.push({ reconciler: reconcilers[entity.reconciler]!.name, stream });
  }
  return outcome;
}
