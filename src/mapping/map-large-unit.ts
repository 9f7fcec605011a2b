/**
 * Mapping a large transaction (a bulk update, a backfill) in bounded memory.
 *
 * `mapUnit` holds the whole unit: every change, every view, every event. A large transaction's
 * changes are a sequence read from disk on each iteration (`ChangeSequence`), and its events are
 * made twice instead of held:
 *
 *  1. a counting run: each mapper runs over the unit and its events are checked and counted —
 *     `transaction.count` must be on the first event, before the last one is made; a mapper
 *     that fails does so here, before anything is appended (halt), or is parked;
 *  2. the producing run (`produce()`): the mappers run again and each event is handed out as it
 *     is made — with the same ids, metadata and order `mapUnit` would give it.
 *
 * Mappers are pure (same transaction in, same events out), which is what makes the second run
 * the first one's twin; a mapper whose second run differs stops the line (MapperPurityError).
 * Memory stays bounded when the mapper streams: a generator over `tx.each()`. A mapper that
 * builds arrays (`tx.changes()`, returning an array) still works, holding what it builds.
 *
 * Both runs are generators the caller drives, so that it can let other work (I/O) run between
 * steps: the counting run yields every `step` changes or events, the producing run yields events.
 */
import type { SourceTransaction } from '../source/types.js';
import { declaredChange, visibleChange, type DeclaredChange } from './allowlist.js';
import { DIAGNOSIS_MAX_KEYS } from './failed-record.js';
import { checkMappedEvent, mapperOutput, type CheckedEvent } from './check-mapped-event.js';
import { checkMapContext, diagnose, eventToAppend, mapperFailedRecord, sourceMetadata } from './map-unit.js';
import { MapperError, MapperPurityError } from './mapper-error.js';
import { createStreamingView } from './transaction-view.js';
import type { AnyMapper, EventToAppend, FailedRecord, MapContext } from './types.js';

export interface LargeUnitPlan {
  /** Events the mappers produce in all (parked mappers' excluded): every event's `transaction.count`. */
  readonly events: number;
  /** MapperFailed records of the mappers whose policy is `park` and that failed. */
  readonly failed: readonly FailedRecord[];
  /** The events, made again one at a time, in `mapUnit`'s order. Run it once. */
  produce(): Generator<EventToAppend>;
}

/** What one mapper declares in the unit, learned in one pass for all mappers. */
interface Declared {
  /** Declared row changes. */
  count: number;
  /** Distinct (table, operation) pairs, for the standard metadata. */
  readonly pairs: { table: string; op: string }[];
  /** The first declared changes, for a failure's diagnosis. */
  readonly first: DeclaredChange[];
  truncated: boolean;
}

/** Where a large transaction is in the source, for the errors of its second run. */
type TransactionPosition = { readonly commitLsn: string; readonly xid: number };

/** The default step of the counting run: changes or events between two yields. */
export const LARGE_UNIT_STEP = 5_000;

/**
 * The counting run. Yields (nothing) every `step` changes or events; returns the plan, whose
 * `produce()` is the producing run. Throws a `MapperError` for a failing mapper with policy `halt`.
 */
export function* planLargeUnit(mappers: readonly AnyMapper[], unit: SourceTransaction, context: MapContext, step = LARGE_UNIT_STEP): Generator<void, LargeUnitPlan> {
  checkMapContext(mappers, context);
  const declared = yield* declaredByMapper(mappers, unit, step);
  const produced: { mapper: AnyMapper; count: number; source: Readonly<Record<string, string>> }[] = [];
  const failed: FailedRecord[] = [];
  for (let m = 0; m < mappers.length; m++) {
    const mapper = mappers[m]!;
    const seen = declared[m]!;
    if (seen.count === 0 && !seen.truncated) continue;
    let count = 0;
    try {
      for (const event of mapperOutput(mapper.map(createStreamingView(unit, mapper.tables)), mapper.name)) {
        checkMappedEvent(event, count, mapper.name);
        count += 1;
        if (count % step === 0) yield;
      }
    } catch (error) {
      const visible = seen.first.map(visibleChange);
      const tables = [...new Set(seen.pairs.map((pair) => pair.table))].sort();
      const diagnosis = diagnose(unit, { tables, visible, total: seen.count }, context, mapper.name, error);
      if (mapper.onError === 'halt') throw new MapperError(diagnosis, { cause: error });
      failed.push(mapperFailedRecord(unit, seen.pairs, context, mapper.name, diagnosis));
      continue;
    }
    produced.push({ mapper, count, source: sourceMetadata(unit, seen.pairs, context, mapper.name) });
  }
  const total = produced.reduce((n, p) => n + p.count, 0);
  // The second run is where an impure mapper shows: its errors name the transaction both runs mapped.
  const where = { commitLsn: unit.commitLsn, xid: unit.xid };
  function* producing(): Generator<EventToAppend> {
    let index = 0;
    for (const { mapper, count, source } of produced) {
      let ordinal = 0;
      const iterator = secondRun(mapper, unit, where);
      for (;;) {
        let next: IteratorResult<unknown>;
        try {
          next = iterator.next();
        } catch (error) {
          throw new MapperPurityError(mapper.name, `events[${ordinal}]`, ordinal < count ? 'an event' : 'the end of its events', `threw ${error instanceof Error ? error.message : String(error)}`, where);
        }
        if (next.done) break;
        if (ordinal >= count) throw new MapperPurityError(mapper.name, `events[${ordinal}]`, `${count} events in all`, 'more events', where);
        yield eventToAppend(unit, context, mapper.name, source, recheck(mapper.name, next.value, ordinal, where), ordinal, index, total);
        ordinal += 1;
        index += 1;
      }
      if (ordinal !== count) throw new MapperPurityError(mapper.name, `events[${ordinal}]`, `${count} events in all`, `${ordinal} events in all`, where);
    }
  }
  return { events: total, failed, produce: producing };
}

/** An event of the producing run, checked again: the counting run found it valid, so a problem now is a difference between the runs. */
function recheck(mapper: string, event: unknown, ordinal: number, where: TransactionPosition): CheckedEvent {
  try {
    return checkMappedEvent(event, ordinal, mapper);
  } catch (error) {
    throw new MapperPurityError(mapper, `events[${ordinal}]`, 'a valid event', `an invalid one: ${error instanceof Error ? error.message : String(error)}`, where);
  }
}

/** The mapper's events on the producing run (a throw of `map` itself is the purity error of its first event). */
function secondRun(mapper: AnyMapper, unit: SourceTransaction, where: TransactionPosition): Iterator<unknown> {
  try {
    return mapperOutput(mapper.map(createStreamingView(unit, mapper.tables)))[Symbol.iterator]();
  } catch (error) {
    throw new MapperPurityError(mapper.name, 'events[0]', 'an event', `threw ${error instanceof Error ? error.message : String(error)}`, where);
  }
}

/** One pass over the unit: what each mapper declares in it. */
function* declaredByMapper(mappers: readonly AnyMapper[], unit: SourceTransaction, step: number): Generator<void, Declared[]> {
  const declared: Declared[] = mappers.map(() => ({ count: 0, pairs: [], first: [], truncated: false }));
  /** Mappers (by index) reading each table. */
  const readers = new Map<string, number[]>();
  mappers.forEach((mapper, m) => {
    for (const table of Object.keys(mapper.tables)) readers.set(table, [...(readers.get(table) ?? []), m]);
  });
  let seen = 0;
  for (const change of unit.changes) {
    seen += 1;
    if (seen % step === 0) yield;
    if (change.op === 'truncate') {
      for (const table of change.tables) for (const m of readers.get(table) ?? []) declared[m]!.truncated = true;
      continue;
    }
    if (change.op !== 'insert' && change.op !== 'update' && change.op !== 'delete') continue;
    const list = readers.get(change.table);
    if (!list) continue;
    for (const m of list) {
      const d = declared[m]!;
      d.count += 1;
      if (!d.pairs.some((pair) => pair.table === change.table && pair.op === change.op)) d.pairs.push({ table: change.table, op: change.op });
      if (d.first.length < DIAGNOSIS_MAX_KEYS) d.first.push(declaredChange(change, seen - 1, mappers[m]!.tables)!);
    }
  }
  return declared;
}
