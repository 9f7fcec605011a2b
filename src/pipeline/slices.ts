/**
 * Large units through the line in bounded memory.
 *
 * A unit of more than `SLICED_UNIT_EVENTS` events (a bulk update, a backfill, a migration) is
 * handed to the appender in slices of that many events, in order, with at most
 * `SLICES_IN_FLIGHT` slices not yet durable: the next slice is made only when the oldest is
 * durable, so memory does not grow with the unit. Its events come as a sequence made on demand
 * (for a large transaction, the mappers' producing run, see mapping/map-large-unit.ts).
 *
 * Slices are appended as they come, each atomically where the server serves multi-stream
 * append, the unit as a whole not: a consumer tells a partial transaction by
 * `transaction.index` / `transaction.count` (docs/bulk-transactions.md). The order of a sliced
 * unit's sink events is fixed — its MapperFailed records first, then the mapped events in
 * order, a contract violation's record in the place of its event — because receipts number the
 * events across the unit (receipt scope `unit`), and a replay must number them alike.
 */
import type { CommittedTransaction } from '../buffer/index.js';
import { SLICED_UNIT_EVENTS, type AppendOutcome, type SinkBatch, type SinkEvent, type SinkMode, type SinkPosition } from '../sink/index.js';
import type { Appender } from './appender.js';
import type { Logger } from './logger.js';

/** Transactions with more changes than this are mapped from a sequence (never held whole), like spilled ones. */
export const LARGE_TRANSACTION_CHANGES = 10_000;

/**
 * Slices of one unit queued and not yet durable, at most: one append call's worth (a call carries
 * up to 2,048 events). Measured on 150,000-row updates killed and replayed: peak RSS 398–411 MiB
 * with 2, 415–440 MiB with 4, at the same events/s (more than 2 only held more events).
 */
export const SLICES_IN_FLIGHT = 2;

/** Parked records of one unit logged one by one; the rest are counted in one line. */
const PARKED_LINES_PER_UNIT = 10;

/** Never settles: the durability of a unit a stop interrupted — it is never acknowledged, and the slot sends it again. */
export const NEVER_DURABLE: Promise<AppendOutcome> = new Promise<AppendOutcome>(() => undefined);

/** Whether a transaction is mapped from a sequence in bounded memory (map-large-unit.ts) rather than held. */
export function isLargeTransaction(tx: CommittedTransaction): boolean {
  return tx.spilled || tx.changeCount > LARGE_TRANSACTION_CHANGES;
}

/** One of a unit's events for the sink, and whether it is a parked record rather than a business event. */
export interface SinkItem {
  readonly event: SinkEvent;
  readonly parked: boolean;
}

export interface SliceDeps {
  readonly appender: Appender;
  readonly log: Logger;
  /** A stop was requested: make no further slice (the unit is not acknowledged; the slot re-sends it). */
  stopping(): boolean;
  /** A slice is durable: its outcome, and its business events by type. */
  onDurable(outcome: AppendOutcome, types: ReadonlyMap<string, number>): void;
  /** Logs a parked record (the first few of a unit; the rest are counted). */
  logParked(record: SinkEvent): void;
  /** Counts a parked record (every one). */
  countParked(record: SinkEvent): void;
}

/** A unit queued in slices: the promise that all of it is durable (summed outcome). */
export interface SlicedUnit {
  readonly durable: Promise<AppendOutcome>;
  readonly slices: number;
  /** Parked records among its events. */
  readonly parked: number;
}

function describe(position: SinkPosition): string {
  return position.kind === 'snapshot' ? `snapshot record ${position.snapshotGeneration}#${position.sequence}` : `transaction ${position.commitLsn}/${position.xid}`;
}

/**
 * Queues a unit's `total` events (`items`, made on demand) in slices; resolves once the last
 * slice is queued. On a stop request it stops making slices: `durable` then never settles, the
 * transaction is never acknowledged, and the slot sends it again after the restart (the
 * receipts recognise what landed).
 */
export async function appendInSlices(deps: SliceDeps, position: SinkPosition, total: number, items: Iterable<SinkItem>, mode: SinkMode | null): Promise<SlicedUnit> {
  const slices = Math.ceil(total / SLICED_UNIT_EVENTS);
  deps.log.info('large unit: appended in slices, each atomic, the unit not — consumers tell a partial transaction by transaction.index/count', {
    unit: describe(position),
    events: total,
    slices,
    sliceEvents: SLICED_UNIT_EVENTS,
  });
  // Each slice's outcome is summed as it comes and let go: a unit of 1,000,000 events has 1,000
  // slices, and their outcomes list every stream.
  const durables: Promise<void>[] = [];
  const sum = { appended: 0, skipped: 0, mode: mode ?? ('multi-stream' as SinkMode) };
  let offset = 0;
  let parked = 0;
  let batch: SinkEvent[] = [];
  let types = new Map<string, number>();
  let interrupted = false;
  const queue = async (): Promise<void> => {
    const slice: SinkBatch = { position, events: batch, slice: { offset, total } };
    const sliceTypes = types;
    offset += batch.length;
    batch = [];
    types = new Map();
    // Backpressure: the oldest slice still in flight must be durable before another is made.
    if (durables.length >= SLICES_IN_FLIGHT) await durables[durables.length - SLICES_IN_FLIGHT];
    const durable = deps.appender.append(slice).then((outcome) => {
      deps.onDurable(outcome, sliceTypes);
      sum.appended += outcome.appended;
      sum.skipped += outcome.skipped;
      sum.mode = outcome.mode;
    });
    durable.catch(() => undefined); // reported through `durable` below
    durables.push(durable);
  };
  for (const item of items) {
    if (item.parked) {
      parked += 1;
      deps.countParked(item.event);
      if (parked <= PARKED_LINES_PER_UNIT) deps.logParked(item.event);
    } else {
      types.set(item.event.type, (types.get(item.event.type) ?? 0) + 1);
    }
    batch.push(item.event);
    if (batch.length === SLICED_UNIT_EVENTS) {
      await queue();
      if (deps.stopping()) {
        interrupted = true;
        break;
      }
    }
  }
  if (!interrupted && batch.length > 0) await queue();
  if (parked > PARKED_LINES_PER_UNIT) deps.log.warn('records parked', { unit: describe(position), parked, logged: PARKED_LINES_PER_UNIT });
  if (!interrupted && offset !== total) throw new Error(`unreachable: ${describe(position)} made ${offset} events for the sink, ${total} planned`);
  if (interrupted) return { durable: NEVER_DURABLE, slices, parked };
  const all = Promise.all(durables).then((): AppendOutcome => ({ appended: sum.appended, skipped: sum.skipped, streams: [], checkpoint: 'none', mode: sum.mode }));
  return { durable: all, slices, parked };
}

/**
 * A unit's events in the order a sliced unit appends them: the MapperFailed records, then the
 * mapped events with each contract violation's record in place of its event. `check` gives an
 * event's violation record (null: it keeps its contract; it throws under policy halt).
 */
export function* slicedOrder<E extends SinkEvent>(failed: Iterable<SinkEvent>, events: Iterable<E>, check: (event: E) => SinkEvent | null): Generator<SinkItem> {
  for (const record of failed) yield { event: record, parked: true };
  for (const event of events) {
    const record = check(event);
    yield record ? { event: record, parked: true } : { event, parked: false };
  }
}
