/**
 * The pipeline's path for large units: a unit of more than SLICED_UNIT_EVENTS events queued in
 * slices (slices.ts), and a large transaction (spilled, or more than LARGE_TRANSACTION_CHANGES
 * changes) mapped from its change sequence in two runs (mapping/map-large-unit.ts) — whole when
 * it makes few events, in slices otherwise. The assembler's counters come in explicitly.
 */
import { planLargeUnit, type AnyMapper, type EventToAppend, type FailedRecord, type MapResult } from '../mapping/index.js';
import { SLICED_UNIT_EVENTS, type AppendOutcome, type SinkEvent, type SinkMode, type SinkPosition } from '../sink/index.js';
import type { SourceTransaction, SourceUnit } from '../source/types.js';
import type { Appender } from './appender.js';
import type { ContractCheck } from './contract-check.js';
import type { Logger } from './logger.js';
import { appendInSlices, NEVER_DURABLE, slicedOrder } from './slices.js';

/** A unit handed to the appender: the promise that it is durable. */
export type Queued = { readonly durable: Promise<AppendOutcome> };

/** The assembler's counters a large unit moves. */
export interface UnitCounts {
  parkedTx: number;
  sliced: number;
  eventsAppended: number;
  replaySkipped: number;
  mapperFailures: number;
  contractViolations: number;
}

export interface LargeUnitDeps {
  readonly mappers: readonly AnyMapper[];
  readonly assembler: string;
  readonly log: Logger;
  readonly counts: UnitCounts;
  /** Durable events by type. */
  readonly byType: Record<string, number>;
  appender(): Appender;
  checkContract(): ContractCheck;
  mode(): SinkMode | null;
  /** A stop was requested: make no more of a unit (it is not acknowledged; the slot re-sends it). */
  stopping(): boolean;
  /** The fatal error that stopped the line, if any. */
  fatal(): unknown;
  logParked(record: SinkEvent): void;
  /** Counts a parked record by mapper and kind (every one, logged or not). */
  countParked(record: SinkEvent): void;
  /** Queues a unit of at most SLICED_UNIT_EVENTS events whole (the assembler's ordinary path). */
  queueWhole(unit: SourceUnit, position: SinkPosition, mapped: MapResult): Queued | null | Promise<Queued | null>;
}

export function createLargeUnits(deps: LargeUnitDeps) {
  const { counts, byType } = deps;
  const sliceDeps = {
    get appender() {
      return deps.appender();
    },
    log: deps.log,
    stopping: deps.stopping,
    onDurable(outcome: AppendOutcome, types: ReadonlyMap<string, number>) {
      counts.eventsAppended += outcome.appended;
      counts.replaySkipped += outcome.skipped;
      for (const [type, n] of types) byType[type] = (byType[type] ?? 0) + n;
    },
    logParked: deps.logParked,
    countParked: deps.countParked,
  };

  /** A unit of more than SLICED_UNIT_EVENTS events, queued in slices in bounded memory. */
  async function queueSliced(unit: SourceUnit, position: SinkPosition, total: number, failed: readonly FailedRecord[], events: Iterable<EventToAppend>): Promise<Queued> {
    const fatal = deps.fatal();
    if (deps.stopping() && fatal) throw fatal;
    counts.mapperFailures += failed.length;
    counts.sliced += 1;
    const checkContract = deps.checkContract();
    const check = (event: EventToAppend): SinkEvent | null => {
      const record = checkContract(event, unit);
      if (record) counts.contractViolations += 1;
      return record;
    };
    const sliced = await appendInSlices(sliceDeps, position, total, slicedOrder(failed, events, check), deps.mode());
    return {
      durable: sliced.durable.then((outcome) => {
        if (sliced.parked > 0) counts.parkedTx += 1;
        return outcome;
      }),
    };
  }

  /**
   * A large transaction, mapped from its change sequence in two runs and queued — whole when it
   * makes at most SLICED_UNIT_EVENTS events, else in slices. Yields to I/O while the counting run goes.
   */
  async function mapLarge(unit: SourceTransaction, position: SinkPosition, sourceIdentity: string): Promise<Queued | null> {
    const planning = planLargeUnit(deps.mappers, unit, { assembler: deps.assembler, sourceIdentity });
    let step = planning.next();
    while (!step.done) {
      await new Promise((resolve) => setImmediate(resolve));
      if (deps.stopping()) return { durable: NEVER_DURABLE };
      step = planning.next();
    }
    const plan = step.value;
    const total = plan.events + plan.failed.length;
    if (total === 0) return null;
    if (total <= SLICED_UNIT_EVENTS) return deps.queueWhole(unit, position, { events: [...plan.produce()], failed: plan.failed });
    return queueSliced(unit, position, total, plan.failed, plan.produce());
  }

  return { queueSliced, mapLarge };
}
