// One batch, one PostgreSQL transaction: the guards, the handlers' effects, the receipts, the
// entity versions and the checkpoint's compare-and-set commit together or not at all.
import type pg from 'pg';
import { passThrough, type ContractStep } from './contract-step.js';
import { ProjectionConflictError } from './errors.js';
import { partitionKey } from './partition.js';
import { compareSourceVersions, versionsComparable } from './source-version.js';
import { advanceCheckpoint, atOrBelow, lockCheckpoint, readCheckpoint, samePosition, type StoreTables } from './store.js';
import { entityKey, entityStates, existingReceipts, insertReceipts, parkEvent, writeEntityStates, type EntityState, type EntityWrite } from './store-rows.js';
import type { AllPosition, BatchOutcome, Guard, Projection, ProjectionContext, ProjectionEvent } from './types.js';

/** Where a batch goes: the projection, its partition's checkpoint row, the state tables, the projection's schema. */
export interface BatchTarget {
  readonly projection: Projection<any>;
  readonly tables: StoreTables;
  readonly schema: string;
  /** The projection's key in the state tables (checkpoints, receipts, entity versions, parked events). @default the projection's name; generation N: `<name>@g<N>` */
  readonly key?: string;
}

/** The key a target's rows are stored under. */
export function stateKey(target: BatchTarget): string {
  return target.key ?? target.projection.name;
}

/** A handler (or the contract step before it) threw on `events[index]`; the batch's transaction was rolled back. */
export class HandlerFailure extends Error {
  constructor(
    readonly index: number,
    readonly event: ProjectionEvent,
    readonly failure: unknown,
  ) {
    super(`handler failed on event ${index} (${event.type} ${event.id})`, { cause: failure });
  }
}

/** An event parked in the batch's transaction instead of applied (the atomic mode's poison handling, poison.ts). */
export interface ParkedInBatch {
  readonly event: ProjectionEvent;
  readonly error: unknown;
  readonly attempts: number;
}

export interface BatchOptions {
  /** Where the checkpoint moves: at or after the last event (a clean cut after events not selected). @default the last event's position */
  readonly through?: AllPosition;
  /** Events of the batch to park (with their diagnosis) rather than apply, in the same transaction. */
  readonly park?: readonly ParkedInBatch[];
}

/** What the guards and handlers did to the batch's events, before anything is written. */
interface Applied {
  applied: number;
  unhandled: number;
  skipped: Record<Guard, number>;
  receipts: ProjectionEvent[];
  entityWrites: Map<string, EntityWrite>;
}

/**
 * Which guard recognises `event` as already applied, or null. `states` holds the recorded versions
 * (updated as the batch goes). A `checkpoint` of null leaves the position guard out (replay-parked.ts:
 * a parked event is behind the checkpoint by design).
 */
export function guardOf(event: ProjectionEvent, checkpoint: AllPosition | null, receipts: ReadonlySet<string>, states: ReadonlyMap<string, EntityState>): Guard | null {
  if (atOrBelow(event.position, checkpoint)) return 'position';
  if (receipts.has(event.id)) return 'receipt';
  if (event.entity && event.sourceVersion) {
    const state = states.get(entityKey(event.entity.type, event.entity.id));
    if (state && versionsComparable(state.version, event.sourceVersion) && compareSourceVersions(event.sourceVersion, state.version) <= 0) return 'entityVersion';
  }
  return null;
}

/** The projection's handler for `type`, if it has one. */
export function handlerOf(projection: Projection<any>, type: string): ((event: ProjectionEvent, ctx: ProjectionContext) => unknown) | undefined {
  return projection.handlers[type] as ((event: ProjectionEvent, ctx: ProjectionContext) => unknown) | undefined;
}

async function runEvents(client: pg.ClientBase, target: BatchTarget, checkpoint: AllPosition | null, events: readonly ProjectionEvent[], contract: ContractStep): Promise<Applied> {
  const { projection, tables } = target;
  const key = stateKey(target);
  const candidates = events.filter((e) => !atOrBelow(e.position, checkpoint));
  const receipts = await existingReceipts(client, tables, key, candidates.map((e) => e.id));
  const entities = new Map<string, { type: string; id: string }>();
  for (const e of candidates) if (e.entity && e.sourceVersion) entities.set(entityKey(e.entity.type, e.entity.id), e.entity);
  const states = await entityStates(client, tables, key, [...entities.values()]);
  const ctx: ProjectionContext = { client, schema: target.schema, projection: projection.name };
  const out: Applied = { applied: 0, unhandled: 0, skipped: { position: 0, receipt: 0, entityVersion: 0 }, receipts: [], entityWrites: new Map() };
  for (let index = 0; index < events.length; index++) {
    const event = events[index]!;
    const guard = guardOf(event, checkpoint, receipts, states);
    if (guard !== null) {
      out.skipped[guard]++;
      continue;
    }
    const handler = handlerOf(projection, event.type);
    const deletes = projection.deletes.has(event.type);
    if (!handler && !deletes) {
      out.unhandled++;
      continue;
    }
    try {
      if (handler) await handler(contract(event), ctx);
    } catch (error) {
      throw new HandlerFailure(index, event, error);
    }
    out.applied++;
    receipts.add(event.id);
    out.receipts.push(event);
    if (event.entity && event.sourceVersion) {
      const key = entityKey(event.entity.type, event.entity.id);
      const state: EntityState = { version: event.sourceVersion, deleted: deletes };
      states.set(key, state);
      out.entityWrites.set(key, { ...state, type: event.entity.type, id: event.entity.id, eventId: event.id });
    }
  }
  return out;
}

/**
 * Applies `events` (in `$all` order) in one transaction and returns what happened. The checkpoint
 * row is locked and compared with `expected` first (`'current'`: whatever is stored, for callers
 * that own the partition), then each event passes the guards — its position at or below the
 * checkpoint, its receipt, its entity's recorded source version at or above its own — or runs its
 * handler and gets a receipt and an entity version (a tombstone for `deletes` types); last, the
 * checkpoint moves to the last event by compare-and-set. Throws `ProjectionConflictError` when
 * the checkpoint is not at `expected` (nothing applied), `HandlerFailure` when a handler throws
 * (nothing applied).
 */
export async function applyBatch(
  client: pg.ClientBase,
  target: BatchTarget,
  expected: AllPosition | null | 'current',
  events: readonly ProjectionEvent[],
  contract: ContractStep = passThrough,
  options: BatchOptions = {},
): Promise<BatchOutcome> {
  const { projection, tables } = target;
  const key = stateKey(target);
  const partition = partitionKey(projection.partition);
  await client.query('BEGIN');
  try {
    const found = await lockCheckpoint(client, tables, key, partition);
    const checkpoint = expected === 'current' ? found : expected;
    if (!samePosition(found, checkpoint)) throw new ProjectionConflictError(projection.name, partition, checkpoint, found);
    const parked = new Set((options.park ?? []).map((p) => p.event.id));
    const out = await runEvents(client, target, checkpoint, parked.size === 0 ? events : events.filter((e) => !parked.has(e.id)), contract);
    await insertReceipts(client, tables, key, out.receipts);
    await writeEntityStates(client, tables, key, [...out.entityWrites.values()]);
    for (const p of options.park ?? []) await parkEvent(client, tables, key, partition, p.event, p.error, p.attempts);
    const last = options.through ?? events.at(-1)?.position;
    const next = last && !atOrBelow(last, checkpoint) ? last : checkpoint;
    if (next !== null && next !== checkpoint && !(await advanceCheckpoint(client, tables, key, partition, checkpoint, next))) {
      throw new ProjectionConflictError(projection.name, partition, checkpoint, await readCheckpoint(client, tables, key, partition));
    }
    await client.query('COMMIT');
    return { applied: out.applied, unhandled: out.unhandled, skipped: out.skipped, position: next };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
