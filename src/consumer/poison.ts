// Poison events: a batch whose handler throws is rolled back; the events before the failing one
// are applied as a batch of their own, the failing one is retried alone with backoff, then parked
// (its diagnosis in the failed-events table, the checkpoint moved past it, in one transaction) or
// the runner halts before it — by the projection's `onError`. Never skipped silently.
import type pg from 'pg';
import { applyBatch, HandlerFailure, stateKey, type BatchTarget, type ParkedInBatch } from './apply-batch.js';
import type { ContractStep } from './contract-step.js';
import { ProjectionConflictError, ProjectionHandlerError } from './errors.js';
import { partitionKey } from './partition.js';
import { advanceCheckpoint, lockCheckpoint, samePosition } from './store.js';
import { parkEvent } from './store-rows.js';
import { describeCause } from '../mapping/failed-record.js';
import type { FeedBatch } from './unit-queue.js';
import type { AllPosition, BatchOutcome, Guard, ProjectionEvent, ProjectionLogger } from './types.js';

/** Running totals of a runner, updated as batches commit. */
export interface Totals {
  applied: number;
  unhandled: number;
  skipped: Record<Guard, number>;
  parked: number;
  batches: number;
}

export function emptyTotals(): Totals {
  return { applied: 0, unhandled: 0, skipped: { position: 0, receipt: 0, entityVersion: 0 }, parked: 0, batches: 0 };
}

/** Thrown out of a backoff wait when the runner is stopped: nothing of the batch in retry was committed. */
export class StopRequested extends Error {
  constructor() {
    super('stop requested during a retry');
  }
}

/** What recovery needs: one client, the target, the contract step, the totals to update, the stop signal. */
export interface BatchDeps {
  readonly client: pg.ClientBase;
  readonly target: BatchTarget;
  readonly contract: ContractStep;
  readonly totals: Totals;
  readonly logger: ProjectionLogger;
  readonly signal: AbortSignal;
}

function count(totals: Totals, outcome: BatchOutcome): void {
  totals.applied += outcome.applied;
  totals.unhandled += outcome.unhandled;
  for (const guard of Object.keys(outcome.skipped) as Guard[]) totals.skipped[guard] += outcome.skipped[guard];
  totals.batches++;
}

function backoff(wait: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new StopRequested());
    const onAbort = () => {
      clearTimeout(timer);
      reject(new StopRequested());
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, wait);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Parks `event` and moves the checkpoint past it, in one transaction (compare-and-set as for a batch). */
async function park(deps: BatchDeps, expected: AllPosition | null, event: ProjectionEvent, error: unknown, attempts: number): Promise<AllPosition> {
  const { client, target } = deps;
  const { projection, tables } = target;
  const key = stateKey(target);
  const partition = partitionKey(projection.partition);
  await client.query('BEGIN');
  try {
    const found = await lockCheckpoint(client, tables, key, partition);
    if (!samePosition(found, expected) || !(await advanceCheckpoint(client, tables, key, partition, expected, event.position))) {
      throw new ProjectionConflictError(projection.name, partition, expected, found);
    }
    await parkEvent(client, tables, key, partition, event, error, attempts);
    await client.query('COMMIT');
  } catch (failure) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw failure;
  }
  deps.totals.parked++;
  deps.logger.warn('projection parked an event', { projection: projection.name, partition, eventId: event.id, type: event.type, stream: event.stream, attempts, cause: describeCause(error) });
  return event.position;
}

function handlerError(deps: BatchDeps, event: ProjectionEvent, last: unknown, attempts: number): ProjectionHandlerError {
  const { projection } = deps.target;
  return new ProjectionHandlerError(
    { projection: projection.name, eventId: event.id, type: event.type, stream: event.stream, revision: event.revision, position: event.position, attempts, cause: describeCause(last) },
    last,
  );
}

/** The failing event alone, `retry.attempts` more times with exponential backoff; then park or halt. */
async function retryAlone(deps: BatchDeps, expected: AllPosition | null, failure: HandlerFailure): Promise<AllPosition | null> {
  const { projection } = deps.target;
  const { attempts, initialDelayMs, maxDelayMs } = projection.retry;
  let last: unknown = failure.failure;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    await backoff(Math.min(maxDelayMs, initialDelayMs * 2 ** (attempt - 1)), deps.signal);
    try {
      const outcome = await applyBatch(deps.client, deps.target, expected, [failure.event], deps.contract);
      count(deps.totals, outcome);
      return outcome.position;
    } catch (error) {
      if (!(error instanceof HandlerFailure)) throw error;
      last = error.failure;
    }
  }
  const event = failure.event;
  if (projection.onError === 'park') return park(deps, expected, event, last, attempts + 1);
  throw handlerError(deps, event, last, attempts + 1);
}

/**
 * The transaction-atomic mode's batch: whole source transactions, the checkpoint to the clean cut
 * `batch.through`. A failing handler does not split the batch: the whole batch is tried again
 * with backoff, `retry.attempts` times per failing event; then the runner halts before the batch,
 * or (`onError: 'park'`) the event is parked in the batch's transaction and the rest of the batch
 * — its own transaction's other events included — is applied without it.
 */
export async function applyAtomic(deps: BatchDeps, expected: AllPosition | null, batch: FeedBatch): Promise<AllPosition | null> {
  const { projection } = deps.target;
  const failures = new Map<string, number>();
  const park: ParkedInBatch[] = [];
  for (;;) {
    try {
      const outcome = await applyBatch(deps.client, deps.target, expected, batch.events, deps.contract, { through: batch.through, park });
      count(deps.totals, outcome);
      deps.totals.parked += park.length;
      for (const p of park) {
        deps.logger.warn('projection parked an event', { projection: projection.name, partition: partitionKey(projection.partition), eventId: p.event.id, type: p.event.type, stream: p.event.stream, attempts: p.attempts, cause: describeCause(p.error) });
      }
      return outcome.position;
    } catch (error) {
      if (!(error instanceof HandlerFailure)) throw error;
      const attempts = (failures.get(error.event.id) ?? 0) + 1;
      failures.set(error.event.id, attempts);
      if (attempts <= projection.retry.attempts) {
        deps.logger.warn('projection handler failed; trying the transaction again', { projection: projection.name, eventId: error.event.id, type: error.event.type, attempt: attempts, cause: describeCause(error.failure) });
        await backoff(Math.min(projection.retry.maxDelayMs, projection.retry.initialDelayMs * 2 ** (attempts - 1)), deps.signal);
        continue;
      }
      if (projection.onError !== 'park') throw handlerError(deps, error.event, error.failure, attempts);
      park.push({ event: error.event, error: error.failure, attempts });
    }
  }
}

/**
 * Applies `events` as one batch; when a handler throws, isolates the failing event (the events
 * before it as a batch, it alone with retries, the rest as a batch — recursively). Returns the
 * checkpoint afterwards.
 */
export async function applyRecovering(deps: BatchDeps, expected: AllPosition | null, events: readonly ProjectionEvent[]): Promise<AllPosition | null> {
  if (events.length === 0) return expected;
  try {
    const outcome = await applyBatch(deps.client, deps.target, expected, events, deps.contract);
    count(deps.totals, outcome);
    return outcome.position;
  } catch (error) {
    if (!(error instanceof HandlerFailure)) throw error;
    deps.logger.warn('projection handler failed; isolating the event', {
      projection: deps.target.projection.name,
      eventId: error.event.id,
      type: error.event.type,
      cause: describeCause(error.failure),
    });
    let position = await applyRecovering(deps, expected, events.slice(0, error.index));
    position = await retryAlone(deps, position, error);
    return applyRecovering(deps, position, events.slice(error.index + 1));
  }
}
