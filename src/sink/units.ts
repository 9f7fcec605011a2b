/**
 * From batches to what the appenders write, and back to outcomes.
 *
 * A call carries one or more units (source transactions, snapshot records, or slices of a large
 * unit). Each event gets its receipt: its unit, and its ordinal — among the unit's events in its
 * stream, or, for a slice, among all the unit's events (scope `unit`, receipt.ts). Events are
 * merged per stream in call order; the sink's checkpoint event (when on) goes with the call's
 * last complete unit.
 */
import { canonicalLsn, isLsn } from '../source/position.js';
import { prepareEvent, unitReceiptPart, uuidv5, type PreparedEvent } from './encoding.js';
import { SinkError } from './errors.js';
import { CHECKPOINT_EVENT_TYPE, type SinkConfig } from './options.js';
import type { Group } from './plan.js';
import { compareUnits, type ReceiptUnit } from './receipt.js';
import { SLICED_UNIT_EVENTS, type AppendOutcome, type SinkBatch, type SinkEvent, type SinkMode, type SinkPosition, type StreamAppendOutcome } from './types.js';

/** One unit's share of a call. */
interface UnitShare {
  /** Its business streams, in order of first appearance. */
  readonly streams: readonly string[];
  readonly events: readonly PreparedEvent[];
  /** Events of a unit handed over twice in one call (the second delivery is a replay). */
  readonly duplicate: number;
}

export interface PreparedCall {
  readonly label: string;
  /** Business streams in order of first appearance, then the checkpoint stream (when on). */
  readonly groups: readonly Group[];
  /** Prepared event → the index of its unit in the call (multi-stream appends are cut at unit boundaries). */
  readonly unitOf: ReadonlyMap<PreparedEvent, number>;
  readonly perUnit: readonly UnitShare[];
  readonly checkpoint: { readonly event: PreparedEvent; readonly unit: number } | null;
}

export function jsonSafe(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
}

export function describe(unit: ReceiptUnit): string {
  return unit.kind === 'transaction' ? `transaction ${unit.commitLsn}/${unit.xid}` : `snapshot record ${unit.generation}#${unit.sequence}`;
}

/** The receipt unit of a batch position (checked: a bad position is the caller's bug, named). */
export function unitOfPosition(config: SinkConfig, position: SinkPosition): ReceiptUnit {
  const invalid = (why: string): SinkError => new SinkError('SINK_INVALID_POSITION', `batch position ${why}`, { position: jsonSafe(position) });
  const source = position.systemId === undefined ? {} : { source: position.systemId };
  if (position.kind === 'snapshot') {
    if (!isLsn(position.lsn)) throw invalid(`has an lsn that is not a PostgreSQL LSN: ${JSON.stringify(position.lsn)}`);
    if (!Number.isSafeInteger(position.sequence) || position.sequence < 0) throw invalid('needs a non-negative integer sequence');
    return {
      kind: 'snapshot',
      assembler: config.assembler,
      ...source,
      lsn: canonicalLsn(position.lsn),
      generation: position.snapshotGeneration,
      sequence: position.sequence,
      table: position.table,
      key: position.key,
    };
  }
  if (typeof position.commitLsn !== 'string' || !isLsn(position.commitLsn)) throw invalid(`has a commitLsn that is not a PostgreSQL LSN: ${JSON.stringify(position.commitLsn)}`);
  if (!Number.isInteger(position.xid) || position.xid < 0) throw invalid('needs a non-negative integer xid');
  return { kind: 'transaction', assembler: config.assembler, ...source, commitLsn: canonicalLsn(position.commitLsn), xid: position.xid };
}

function checkSlice(batch: SinkBatch, unit: ReceiptUnit): void {
  const slice = batch.slice;
  if (!slice) return;
  const { offset, total } = slice;
  if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(total) || offset + batch.events.length > total) {
    throw new SinkError('SINK_INVALID_POSITION', `slice of ${describe(unit)} at offset ${offset} with ${batch.events.length} events does not fit its unit of ${total}`, { offset, total, events: batch.events.length });
  }
  if (total <= SLICED_UNIT_EVENTS) {
    // Whether a unit is sliced must depend on the unit alone (it decides how receipts number it).
    throw new SinkError('SINK_INVALID_POSITION', `${describe(unit)} has ${total} events: only units of more than ${SLICED_UNIT_EVENTS} are appended in slices`, { total });
  }
}

/** A batch is the end of its unit: a whole unit, or its last slice. */
function completes(batch: SinkBatch): boolean {
  return !batch.slice || batch.slice.offset + batch.events.length === batch.slice.total;
}

function checkpointEvent(config: SinkConfig, stream: string, position: SinkPosition, unit: ReceiptUnit): PreparedEvent {
  const unitKey = unit.kind === 'transaction' ? ['transaction', unit.source ?? '', unit.commitLsn, unit.xid] : ['snapshot', unit.source ?? '', unit.generation, unit.sequence];
  const event: SinkEvent = {
    id: uuidv5(JSON.stringify(['checkpoint', config.assembler, ...unitKey])),
    stream,
    type: CHECKPOINT_EVENT_TYPE,
    data: { assembler: config.assembler, position: jsonSafe(position) },
    metadata: {
      contract: `${CHECKPOINT_EVENT_TYPE}@1`,
      ...(position.checkpoint !== undefined ? { 'source.checkpoint': position.checkpoint } : {}),
    },
  };
  return prepareEvent(event, unit, 0, 1);
}

/** Prepares a call: receipts stamped, events merged per stream, the checkpoint event added. */
export function prepareCall(config: SinkConfig, batches: readonly SinkBatch[]): PreparedCall {
  const units = batches.map((batch) => (isPrepared(batch) ? batch[PREPARED] : unitOfPosition(config, batch.position)));
  const label = units.length === 1 ? describe(units[0]!) : `${units.length} units, ${describe(units[0]!)} … ${describe(units[units.length - 1]!)}`;
  const byStream = new Map<string, PreparedEvent[]>();
  /** Event id → the unit (index) that brought it. */
  const ids = new Map<string, number>();
  const unitOf = new Map<PreparedEvent, number>();
  const perUnit: UnitShare[] = [];
  let lastComplete = -1;
  /** Checks an event of unit `u` (its id unique in the call, not the checkpoint stream) and notes its id. */
  const admit = (event: SinkEvent, u: number): void => {
    if (ids.has(event.id)) {
      throw new SinkError('SINK_INVALID_EVENT', `event id ${event.id} appears twice in ${describe(units[u]!)}${units.length > 1 ? ' (or in an earlier unit of the same batch)' : ''}; ids must be unique per delivery`, { eventId: event.id, stream: event.stream });
    }
    ids.set(event.id, u);
    if (event.stream === config.checkpointStream) {
      throw new SinkError('SINK_INVALID_EVENT', `event ${event.type} targets the assembler's checkpoint stream "${event.stream}"`, { stream: event.stream, type: event.type });
    }
  };
  /** Adds a prepared event of unit `u` to its stream's events, in call order. */
  const place = (p: PreparedEvent, u: number): void => {
    let merged = byStream.get(p.stream);
    if (!merged) byStream.set(p.stream, (merged = []));
    merged.push(p);
    unitOf.set(p, u);
  };
  for (let u = 0; u < batches.length; u++) {
    const batch = batches[u]!;
    const unit = units[u]!;
    if (!isPrepared(batch)) checkSlice(batch, unit);
    const first = batch.events[0];
    const owner = first ? ids.get(first.id) : undefined;
    if (owner !== undefined && owner !== u && compareUnits(units[owner]!, unit) === 0) {
      // The same unit (or slice) handed over twice in one call (e.g. a snapshot record read
      // again): the second delivery is a replay of the first — nothing of it is appended again.
      perUnit.push({ streams: [], events: [], duplicate: batch.events.length });
      continue;
    }
    perUnit.push(prepareUnit(batch, unit, u, admit, place));
    if (batch.events.length > 0 && completes(batch)) lastComplete = u;
  }
  const groups: Group[] = [...byStream].map(([stream, events]) => ({ stream, events }));
  // One checkpoint event per call, for its last complete unit with events (a call lands as a whole in multi-stream mode).
  let checkpoint: PreparedCall['checkpoint'] = null;
  if (config.checkpointStream && lastComplete >= 0) {
    const event = checkpointEvent(config, config.checkpointStream, batches[lastComplete]!.position, units[lastComplete]!);
    groups.push({ stream: config.checkpointStream, events: [event] });
    unitOf.set(event, lastComplete);
    checkpoint = { event, unit: lastComplete };
  }
  return { label, groups, unitOf, perUnit, checkpoint };
}

/**
 * A unit's events prepared, in the batch's order: each with its receipt's ordinal — its place
 * among the unit's events in its stream, or, for a slice, in the whole unit.
 */
function unitEvents(batch: SinkBatch, unit: ReceiptUnit): PreparedEvent[] {
  const events = batch.events;
  if (batch.slice) {
    const { offset, total } = batch.slice;
    const unitPart = unitReceiptPart(unit);
    return events.map((event, i) => prepareEvent(event, unitPart, offset + i, total, 'unit'));
  }
  // The common unit: one event — what the general path below does, without its maps.
  if (events.length === 1) return [prepareEvent(events[0]!, unit, 0, 1)];
  const counts = new Map<string, number>();
  for (const event of events) counts.set(event.stream, (counts.get(event.stream) ?? 0) + 1);
  const next = new Map<string, number>();
  const unitPart = unitReceiptPart(unit);
  return events.map((event) => {
    const ordinal = next.get(event.stream) ?? 0;
    next.set(event.stream, ordinal + 1);
    return prepareEvent(event, unitPart, ordinal, counts.get(event.stream)!);
  });
}

/** Marks a batch prepared when it was queued ({@link prepareBatch}); holds its receipt unit. */
const PREPARED = Symbol('prepared unit');

interface PreparedBatch extends SinkBatch {
  readonly events: readonly PreparedEvent[];
  readonly [PREPARED]: ReceiptUnit;
}

function isPrepared(batch: SinkBatch): batch is PreparedBatch {
  return PREPARED in batch;
}

/**
 * The batch with its events prepared and compacted now, when it is queued, long before its call:
 * until then it holds encoded records instead of the mapper's objects (`Prepared.compact`). A
 * batch that cannot be prepared is returned as it is: its call fails with the error it would
 * have failed with anyway.
 */
export function prepareBatch(config: SinkConfig, batch: SinkBatch): SinkBatch {
  if (isPrepared(batch)) return batch;
  try {
    const unit = unitOfPosition(config, batch.position);
    checkSlice(batch, unit);
    const events = unitEvents(batch, unit);
    for (const event of events) event.compact();
    const prepared: PreparedBatch = { position: batch.position, events, [PREPARED]: unit, ...(batch.slice ? { slice: batch.slice } : {}) };
    return prepared;
  } catch {
    return batch;
  }
}

function prepareUnit(batch: SinkBatch, unit: ReceiptUnit, u: number, admit: (event: SinkEvent, u: number) => void, place: (p: PreparedEvent, u: number) => void): UnitShare {
  const events = isPrepared(batch) ? batch.events : unitEvents(batch, unit);
  for (const event of events) admit(event, u);
  for (const event of events) place(event, u);
  // Its streams in order of first appearance.
  const streams = events.length === 1 ? [events[0]!.stream] : [...new Set(events.map((event) => event.stream))];
  return { streams, events, duplicate: 0 };
}

/** One outcome per unit of the call, in order, from the ids the appends wrote; with the totals. */
export function callOutcomes(
  call: PreparedCall,
  appended: ReadonlySet<string>,
  revisionOf: (stream: string) => bigint | null,
  mode: SinkMode,
): { outcomes: AppendOutcome[]; appended: number; skipped: number } {
  const outcomes: AppendOutcome[] = [];
  let appendedTotal = 0;
  let skippedTotal = 0;
  call.perUnit.forEach(({ streams: names, events, duplicate }, u) => {
    if (duplicate > 0 || events.length === 0) {
      skippedTotal += duplicate;
      outcomes.push({ appended: 0, skipped: duplicate, streams: [], checkpoint: 'none', mode });
      return;
    }
    let unitAppended = 0;
    let streamOutcomes: StreamAppendOutcome[];
    if (names.length === 1) {
      // One stream (the common unit): no per-stream tally needed.
      for (const event of events) if (appended.has(event.id)) unitAppended += 1;
      const stream = names[0]!;
      streamOutcomes = [{ stream, appended: unitAppended, skipped: events.length - unitAppended, revision: revisionOf(stream) }];
    } else {
      const counts = new Map<string, { appended: number; skipped: number }>();
      for (const stream of names) counts.set(stream, { appended: 0, skipped: 0 });
      for (const event of events) {
        const c = counts.get(event.stream)!;
        if (appended.has(event.id)) {
          c.appended += 1;
          unitAppended += 1;
        } else c.skipped += 1;
      }
      streamOutcomes = names.map((stream) => ({ stream, ...counts.get(stream)!, revision: revisionOf(stream) }));
    }
    const unitSkipped = events.length - unitAppended;
    appendedTotal += unitAppended;
    skippedTotal += unitSkipped;
    const checkpoint = call.checkpoint && call.checkpoint.unit === u ? (appended.has(call.checkpoint.event.id) ? 'appended' : 'skipped') : 'none';
    outcomes.push({ appended: unitAppended, skipped: unitSkipped, streams: streamOutcomes, checkpoint, mode });
  });
  return { outcomes, appended: appendedTotal, skipped: skippedTotal };
}
