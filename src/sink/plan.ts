/**
 * What an append call still has to write, and how it is cut into appends. Pure: the states
 * come from stream-states.ts, the appends are made by multi-stream.ts / per-stream.ts.
 */
import { NO_STREAM } from '@kurrent/kurrentdb-client';
import type { PreparedEvent } from './encoding.js';
import { compareReceipts, compareUnits, ordinalsComparable, receiptsComparable, type Receipt } from './receipt.js';
import type { StreamConflictDetails } from './errors.js';
import type { StreamState } from './stream-states.js';

/** One stream's share of a call, in order. */
export interface Group {
  readonly stream: string;
  readonly events: readonly PreparedEvent[];
}

export type Remaining =
  /** The events the stream's receipt does not show as applied. */
  | { readonly kind: 'todo'; readonly events: PreparedEvent[] }
  /** The stream's tail was not written by us (or from another source): never append over it. */
  | { readonly kind: 'conflict'; readonly reason: StreamConflictDetails['reason']; readonly expected: string }
  /**
   * The tail holds events of one of our units numbered in the other scope (per stream vs across
   * the unit: written by a version that did not slice the unit): which of that unit's events
   * landed is told by their ids ({@link remainingById}).
   */
  | { readonly kind: 'by-id'; readonly unit: Receipt };

/**
 * The events of `group` the stream's receipt does not show as applied. A group may hold several
 * units' events (a batch): each event is compared by its own receipt (unit, then ordinal).
 */
export function remaining(group: Group, state: StreamState): Remaining {
  if (state.revision === NO_STREAM || group.events.length === 0) return { kind: 'todo', events: [...group.events] };
  const theirs = state.receipt;
  const first = group.events[0]!.receipt;
  if (!theirs || theirs.assembler !== first.assembler) return { kind: 'conflict', reason: 'foreign-tail', expected: `a tail written by assembler "${first.assembler}"` };
  if (!receiptsComparable(theirs, first)) return { kind: 'conflict', reason: 'receipt-from-other-source', expected: `a receipt from source ${first.source ?? '?'}` };
  const todo: PreparedEvent[] = [];
  for (const event of group.events) {
    if (!ordinalsComparable(event.receipt, theirs)) return { kind: 'by-id', unit: theirs };
    if (compareReceipts(event.receipt, theirs) > 0) todo.push(event);
  }
  return { kind: 'todo', events: todo };
}

/** {@link remaining} when the tail's unit is told by ids: `applied` are the ids of that unit's events in the stream. */
export function remainingById(group: Group, unit: Receipt, applied: ReadonlySet<string>): PreparedEvent[] {
  return group.events.filter((event) => {
    const byUnit = compareUnits(event.receipt, unit);
    return byUnit > 0 || (byUnit === 0 && !applied.has(event.id));
  });
}

/** Cuts the streams' remaining events into multi-stream appends of at most `max` bytes, in order. */
export function chunkAcrossStreams(plans: readonly Group[], max: number): Group[][] {
  const chunks: Group[][] = [];
  let chunk: Group[] = [];
  let size = 0;
  for (const plan of plans) {
    let part: PreparedEvent[] = [];
    for (const event of plan.events) {
      if (size + event.multiStreamSize > max && (chunk.length > 0 || part.length > 0)) {
        if (part.length > 0) chunk.push({ stream: plan.stream, events: part });
        chunks.push(chunk);
        chunk = [];
        part = [];
        size = 0;
      }
      part.push(event);
      size += event.multiStreamSize;
    }
    if (part.length > 0) chunk.push({ stream: plan.stream, events: part });
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/**
 * Cuts a call's remaining events into multi-stream appends of at most `max` bytes at unit
 * boundaries: consecutive whole units per append, so each source transaction still lands
 * atomically; only a unit larger than `max` on its own is cut inside (chunkAcrossStreams).
 * Units are in call order, so every stream keeps its order. `split` lists the units cut.
 */
export function chunkByUnits(plans: readonly Group[], max: number, unitOf: ReadonlyMap<PreparedEvent, number>): { chunks: Group[][]; split: number[] } {
  const sizes = new Map<number, number>();
  for (const plan of plans) {
    for (const event of plan.events) {
      const unit = unitOf.get(event)!;
      sizes.set(unit, (sizes.get(unit) ?? 0) + event.multiStreamSize);
    }
  }
  const order = [...sizes.keys()].sort((a, b) => a - b);
  const ranges: { from: number; to: number }[] = [];
  let current: { from: number; to: number } | null = null;
  let size = 0;
  for (const unit of order) {
    const unitSize = sizes.get(unit)!;
    if (current && size + unitSize <= max) {
      current.to = unit;
      size += unitSize;
    } else {
      current = { from: unit, to: unit };
      ranges.push(current);
      size = unitSize;
    }
  }
  if (ranges.length === 1) {
    const chunks = chunkAcrossStreams(plans, max);
    return { chunks, split: chunks.length > 1 ? [ranges[0]!.from] : [] };
  }
  const chunks: Group[][] = [];
  const split: number[] = [];
  for (const range of ranges) {
    const part: Group[] = [];
    for (const plan of plans) {
      const events = plan.events.filter((event) => {
        const unit = unitOf.get(event)!;
        return unit >= range.from && unit <= range.to;
      });
      if (events.length > 0) part.push({ stream: plan.stream, events });
    }
    const pieces = chunkAcrossStreams(part, max);
    if (pieces.length > 1) split.push(range.from);
    chunks.push(...pieces);
  }
  return { chunks, split };
}
