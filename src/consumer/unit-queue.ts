// The queue of the transaction-atomic mode: every event of `$all` (system events excepted) in
// order, each noted against its source unit (`$correlationId`, `transaction.index/count`), so that
// a batch is only ever cut where every unit begun before the cut is complete — a "clean cut".
//
// Units of concurrent appends interleave in `$all` (the appender runs calls on disjoint streams
// at once; per-stream appends go 16 streams at a time), so a unit is complete when `count` of its
// events were seen, not when the next unit begins. Events the projection does not select are
// counted (a unit's completeness is across all its streams) and not kept. A clean cut is a
// property of the position: whether, right after that event, no unit seen so far was open. It is
// known when the event arrives and never changes.
import { selects } from './define-projection.js';
import { partitionOf } from './partition.js';
import { toProjectionEvent, type RecordedInput } from './projection-event.js';
import type { AllPosition, Projection, ProjectionEvent } from './types.js';

/** What a batch is: the selected events to apply, and the position the checkpoint moves to. */
export interface FeedBatch {
  readonly events: readonly ProjectionEvent[];
  /** The checkpoint after the batch: its last event, or (atomic mode) the clean cut after events not selected. */
  readonly through: AllPosition;
}

interface Entry {
  readonly position: AllPosition;
  /** The event, when the projection selects it. */
  readonly event: ProjectionEvent | null;
  /** Whether no unit was open right after this event. */
  readonly cleanCut: boolean;
}

/** A unit's identity and size, read from the metadata; `null` for an event that is a unit of its own. */
export function unitOf(metadata: unknown): { readonly key: string; readonly count: number } | null {
  if (metadata === null || typeof metadata !== 'object') return null;
  const m = metadata as Record<string, unknown>;
  const key = m['$correlationId'];
  const count = m['transaction.count'];
  const index = m['transaction.index'];
  if (typeof key !== 'string' || typeof count !== 'string' || typeof index !== 'string' || !/^\d+$/.test(count) || !/^\d+$/.test(index)) return null;
  const n = Number(count);
  return n >= 1 ? { key, count: n } : null;
}

export interface UnitQueue {
  /** Notes an event of `$all` (every one, selected or not), in order. */
  push(input: RecordedInput): void;
  /**
   * The longest prefix ending at a clean cut with at most `max` selected events — or, when even
   * the first clean cut holds more, that one (a unit is never cut). `null` while no clean cut is
   * queued (a unit is still arriving).
   */
  take(max: number): FeedBatch | null;
  /** Events queued (selected or not). */
  readonly size: number;
  /** Whether a batch can be taken now. */
  readonly ready: boolean;
  /** Units begun and not complete, with the events seen of each. */
  open(): ReadonlyMap<string, { readonly seen: number; readonly count: number }>;
}

/**
 * `carried`: events per unit at or before the checkpoint the subscription starts after (read
 * backwards at start), for units that may continue after it — a checkpoint of the batched mode
 * may sit inside a unit. A carried unit counts as open only once one of its events arrives.
 */
export function createUnitQueue(projection: Projection<any>, carried: ReadonlyMap<string, number> = new Map()): UnitQueue {
  const entries: Entry[] = [];
  let head = 0;
  let lastCut = -1; // index (in entries) of the last clean cut queued
  const open = new Map<string, { seen: number; count: number }>();
  const carry = new Map(carried);

  function note(unit: { key: string; count: number }): void {
    let state = open.get(unit.key);
    if (!state) {
      state = { seen: carry.get(unit.key) ?? 0, count: unit.count };
      carry.delete(unit.key);
      open.set(unit.key, state);
    }
    state.seen++;
    if (state.seen >= state.count) open.delete(unit.key);
  }

  return {
    push(input) {
      const unit = unitOf(input.metadata);
      if (unit) note(unit);
      const selected = selects(projection, input.stream, input.type, partitionOf(input.stream, projection.partition.count));
      const position = { commit: input.position.commit, prepare: input.position.prepare };
      const cleanCut = open.size === 0;
      entries.push({ position, event: selected ? toProjectionEvent(input) : null, cleanCut });
      if (cleanCut) lastCut = entries.length - 1;
    },
    take(max) {
      if (lastCut < head) return null;
      const events: ProjectionEvent[] = [];
      let cut = -1;
      let pending: ProjectionEvent[] = [];
      for (let i = head; i <= lastCut; i++) {
        const entry = entries[i]!;
        if (entry.event) pending.push(entry.event);
        if (!entry.cleanCut) continue;
        if (cut >= 0 && events.length + pending.length > max) break;
        for (const e of pending) events.push(e);
        pending = [];
        cut = i;
      }
      const through = entries[cut]!.position;
      head = cut + 1;
      if (head > 4096 && head * 2 > entries.length) {
        entries.splice(0, head);
        lastCut -= head;
        head = 0;
      }
      return { events, through };
    },
    get size() {
      return entries.length - head;
    },
    get ready() {
      return lastCut >= head;
    },
    open() {
      return open;
    },
  };
}
