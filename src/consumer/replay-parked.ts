// replayParked: parked events applied after a fix, each in one PostgreSQL transaction that holds
// its partition's checkpoint row (so it takes turns with a running runner's batches) and passes
// the receipt and entity-version guards — not the position guard: the checkpoint is past a parked
// event by design, and it does not move. docs/consumers.md, "Poison events".
import pg from 'pg';
import { guardOf, handlerOf } from './apply-batch.js';
import { loadContractStep, type ContractStep } from './contract-step.js';
import { ProjectionConfigError } from './errors.js';
import { checkSchemaNames } from './options-check.js';
import { generationKey, generationSchema, requireRunnable } from './generation-store.js';
import { deleteParkedEvent, parkedTableExists, readParkedEvents, recordedOfParked, type ParkedEvent } from './parked-events.js';
import { toProjectionEvent } from './projection-event.js';
import { versionsComparable } from './source-version.js';
import { DEFAULT_STATE_SCHEMA, lockCheckpoint, storeTables, type StoreTables } from './store.js';
import { entityKey, entityStates, existingReceipts, insertReceipts, parkEvent, writeEntityStates } from './store-rows.js';
import type { Upcaster } from '../contracts/upcasters.js';
import { describeCause } from '../mapping/failed-record.js';
import type { AllPosition, Projection, ProjectionContext, ProjectionEvent, ProjectionLogger } from './types.js';

/**
 * What became of one parked event. Resolved (no longer parked): `applied` (its handler ran; with
 * `olderThanEntity` when `includeSuperseded` let an event older than its entity's recorded version
 * through), `alreadyApplied` (it had a receipt: the parked row was dropped), `notParked` (gone by
 * the time its turn came: another replay took it). Kept parked: `superseded` (its entity records a
 * newer source version), `entityDeleted` (a tombstone at or after it: a deleted entity stays
 * deleted, even with `includeSuperseded`), `unhandled` (the projection has no handler for its type
 * now, and it is not a delete), `failed` (the contract step or the handler threw again).
 */
export type ParkedReplayKind = 'applied' | 'alreadyApplied' | 'notParked' | 'superseded' | 'entityDeleted' | 'unhandled' | 'failed';

/** The kinds after which the event is no longer parked. */
export const RESOLVED_KINDS: readonly ParkedReplayKind[] = ['applied', 'alreadyApplied', 'notParked'];

export interface ParkedReplayOutcome {
  readonly eventId: string;
  readonly type: string;
  readonly stream: string;
  readonly revision: bigint;
  readonly partition: string;
  readonly position: AllPosition;
  readonly outcome: ParkedReplayKind;
  /** `applied` only: it was at or below its entity's recorded version (let through by `includeSuperseded`; the version was left as it was). */
  readonly olderThanEntity: boolean;
  /** Its handler runs that failed, this replay's included (`failed`: the new count). */
  readonly attempts: number;
  /** `failed`: why, this time. */
  readonly cause: { readonly name: string; readonly message: string } | null;
}

export interface ParkedReplayResult {
  readonly projection: string;
  /** The state key replayed: the name, or `<name>@g<N>`. */
  readonly key: string;
  /** One per selected event, oldest `$all` position first. */
  readonly outcomes: readonly ParkedReplayOutcome[];
  readonly totals: Readonly<Record<ParkedReplayKind, number>> & { readonly selected: number };
  /** Every selected event was reached (no stop) and ended resolved (`applied`, `alreadyApplied`, `notParked`). */
  readonly resolved: boolean;
}

export interface ReplayParkedOptions {
  /** The projection, with its fixed handlers. Its `partition` does not narrow the replay: the parked events of every partition are replayed, each under its own partition's checkpoint lock. */
  readonly projection: Projection<any>;
  /** A connection string or a `pg.Pool` (not ended here). */
  readonly postgres: string | pg.Pool;
  /** @default 'event_assembler' */
  readonly stateSchema?: string;
  /** Schema of the projection's tables, as the runner's. @default 'public' */
  readonly schema?: string;
  /** Replay generation N's parked events (key `<name>@g<N>`, tables in `<name>_g<N>`). */
  readonly generation?: number;
  /** As the runner's: each event is validated and upcast with these contracts, so a contract fix takes effect. @default no validation */
  readonly contracts?: { readonly dir: string; readonly upcasters?: readonly Upcaster[] };
  /** Only these parked events (event ids). Every id must be parked, or nothing is replayed. @default all of the projection's */
  readonly ids?: readonly string[];
  /** Apply events older than their entity's recorded version too — for handlers whose effect does not depend on order (increments). A tombstone still wins. @default false */
  readonly includeSuperseded?: boolean;
  /** Called after each event. */
  readonly onProgress?: (progress: { readonly done: number; readonly total: number; readonly last: ParkedReplayOutcome }) => void;
  /** Stops between events (the events not reached stay parked, and are not in the result). */
  readonly signal?: AbortSignal;
  /** @default silent */
  readonly logger?: ProjectionLogger;
}

const silent: ProjectionLogger = { info() {}, warn() {}, error() {} };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function checkOptions(options: ReplayParkedOptions): void {
  const name = options?.projection?.name ?? '(none)';
  const fail = (field: string, problem: string): never => {
    throw new ProjectionConfigError('PROJECTION_INVALID_OPTIONS', name, field, problem);
  };
  if (!options?.projection || !(options.projection.deletes instanceof Set)) fail('projection', 'must be made with defineProjection({ … })');
  if (typeof options.postgres !== 'string' && !(options.postgres instanceof pg.Pool)) fail('postgres', 'must be a connection string or a pg.Pool');
  checkSchemaNames(options, fail);
  if (options.generation !== undefined) {
    if (!Number.isInteger(options.generation) || options.generation < 1) fail('generation', `must be an integer ≥ 1 (found ${String(options.generation)})`);
    if (options.schema !== undefined) fail('schema', "does not go with generation: a generation's tables are in schema <name>_g<N>");
  }
  if (options.ids !== undefined) {
    if (!Array.isArray(options.ids)) fail('ids', 'must be a list of event ids');
    const bad = options.ids.filter((id) => typeof id !== 'string' || !UUID.test(id));
    if (bad.length > 0) fail('ids', `must be event ids (UUIDs); not one: ${bad.map(String).join(', ')}`);
  }
}

/** What one replay works with. */
interface ReplayDeps {
  readonly client: pg.ClientBase;
  readonly tables: StoreTables;
  readonly key: string;
  readonly projection: Projection<any>;
  readonly schema: string;
  readonly contract: ContractStep;
  readonly includeSuperseded: boolean;
}

type Decision = { kind: Exclude<ParkedReplayKind, 'applied' | 'failed'> } | { kind: 'apply'; olderThanEntity: boolean; writeVersion: boolean };

/** Receipt, then entity version (a tombstone always wins), then whether there is anything to run. */
async function decide(deps: ReplayDeps, event: ProjectionEvent): Promise<Decision> {
  const { client, tables, key, projection } = deps;
  const receipts = await existingReceipts(client, tables, key, [event.id]);
  const entity = event.entity && event.sourceVersion ? event.entity : null;
  const states = await entityStates(client, tables, key, entity ? [entity] : []);
  const guard = guardOf(event, null, receipts, states);
  if (guard === 'receipt') return { kind: 'alreadyApplied' };
  const isDelete = projection.deletes.has(event.type);
  if (!handlerOf(projection, event.type) && !isDelete) return { kind: 'unhandled' };
  const state = entity ? states.get(entityKey(entity.type, entity.id)) : undefined;
  if (guard === 'entityVersion') {
    if (state!.deleted) return { kind: 'entityDeleted' };
    // A delete older than what its entity shows now would remove a newer state: never let through.
    if (isDelete || !deps.includeSuperseded) return { kind: 'superseded' };
    return { kind: 'apply', olderThanEntity: true, writeVersion: false };
  }
  // Newer than the recorded version (or none recorded): it becomes the entity's version. A version
  // of another source system does not order against the recorded one: that one stays.
  const writeVersion = entity !== null && (state === undefined || versionsComparable(state.version, event.sourceVersion!));
  return { kind: 'apply', olderThanEntity: false, writeVersion };
}

/** Thrown inside the event's transaction when the contract step or the handler throws. */
class ReplayFailure extends Error {
  constructor(readonly failure: unknown) {
    super('handler failed', { cause: failure });
  }
}

/** One parked event's transaction. Returns its outcome; throws `ReplayFailure` (rolled back) when the handler threw. */
async function replayOne(deps: ReplayDeps, parked: ParkedEvent): Promise<{ kind: Exclude<ParkedReplayKind, 'failed'>; olderThanEntity: boolean }> {
  const { client, tables, key, projection } = deps;
  await client.query('BEGIN');
  try {
    // The runner's batches lock this row first too: a replay and a batch of the partition take turns.
    await lockCheckpoint(client, tables, key, parked.partition);
    const [row] = await readParkedEvents(client, tables, key, { ids: [parked.eventId], lock: true });
    const event = row ? toProjectionEvent(recordedOfParked(row)) : null;
    const decision: Decision = event ? await decide(deps, event) : { kind: 'notParked' };
    if (decision.kind !== 'apply' && decision.kind !== 'alreadyApplied') {
      await client.query('ROLLBACK');
      return { kind: decision.kind, olderThanEntity: false };
    }
    if (decision.kind === 'apply') {
      const handler = handlerOf(projection, event!.type);
      const ctx: ProjectionContext = { client, schema: deps.schema, projection: projection.name };
      try {
        if (handler) await handler(deps.contract(event!), ctx);
      } catch (error) {
        throw new ReplayFailure(error);
      }
      await insertReceipts(client, tables, key, [event!]);
      if (decision.writeVersion) {
        const { entity, sourceVersion } = event!;
        await writeEntityStates(client, tables, key, [{ type: entity!.type, id: entity!.id, version: sourceVersion!, deleted: projection.deletes.has(event!.type), eventId: event!.id }]);
      }
    }
    await deleteParkedEvent(client, tables, key, parked.eventId);
    await client.query('COMMIT');
    return decision.kind === 'apply' ? { kind: 'applied', olderThanEntity: decision.olderThanEntity } : { kind: 'alreadyApplied', olderThanEntity: false };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** The failed replay's diagnosis and one more attempt on the parked row, in a transaction of its own — unless the row went meanwhile. Returns the attempts now recorded. */
async function recordFailure(deps: ReplayDeps, parked: ParkedEvent, failure: unknown): Promise<number> {
  const { client, tables, key } = deps;
  await client.query('BEGIN');
  try {
    const [row] = await readParkedEvents(client, tables, key, { ids: [parked.eventId], lock: true });
    if (row) await parkEvent(client, tables, key, row.partition, toProjectionEvent(recordedOfParked(row)), failure, 1);
    await client.query('COMMIT');
    return (row?.attempts ?? parked.attempts) + 1;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

async function replayEach(deps: ReplayDeps, selected: readonly ParkedEvent[], options: ReplayParkedOptions, logger: ProjectionLogger): Promise<ParkedReplayOutcome[]> {
  const outcomes: ParkedReplayOutcome[] = [];
  for (const parked of selected) {
    if (options.signal?.aborted) break;
    const base = { eventId: parked.eventId, type: parked.type, stream: parked.stream, revision: parked.revision, partition: parked.partition, position: parked.position };
    let outcome: ParkedReplayOutcome;
    try {
      const { kind, olderThanEntity } = await replayOne(deps, parked);
      outcome = { ...base, outcome: kind, olderThanEntity, attempts: parked.attempts, cause: null };
    } catch (error) {
      if (!(error instanceof ReplayFailure)) throw error;
      const attempts = await recordFailure(deps, parked, error.failure);
      const { name, message } = describeCause(error.failure);
      outcome = { ...base, outcome: 'failed', olderThanEntity: false, attempts, cause: { name, message } };
      logger.warn('parked event failed again; it stays parked', { projection: deps.projection.name, eventId: parked.eventId, type: parked.type, stream: parked.stream, attempts, cause: { name, message } });
    }
    outcomes.push(outcome);
    options.onProgress?.({ done: outcomes.length, total: selected.length, last: outcome });
  }
  return outcomes;
}

function totalsOf(outcomes: readonly ParkedReplayOutcome[]): ParkedReplayResult['totals'] {
  const totals = { selected: outcomes.length, applied: 0, alreadyApplied: 0, notParked: 0, superseded: 0, entityDeleted: 0, unhandled: 0, failed: 0 };
  for (const o of outcomes) totals[o.outcome]++;
  return totals;
}

/**
 * Replays a projection's parked events (all of them, oldest `$all` position first, or `ids`), each
 * in one transaction: its partition's checkpoint row locked, then the receipt guard (already
 * applied: the parked row is dropped), the entity-version guard (superseded or deleted: kept
 * parked), then the contract step and the handler, a receipt, the entity's version when it does
 * not lower the recorded one, and the parked row dropped. A handler that throws again rolls its
 * transaction back; the event stays parked with the new diagnosis and one more attempt. The
 * checkpoint never moves. Throws `ProjectionConfigError` for bad options and for `ids` that are
 * not parked (nothing replayed), and whatever PostgreSQL throws.
 */
export async function replayParked(options: ReplayParkedOptions): Promise<ParkedReplayResult> {
  checkOptions(options);
  const { projection, generation } = options;
  const logger = options.logger ?? silent;
  const tables = storeTables(options.stateSchema ?? DEFAULT_STATE_SCHEMA);
  const key = generation === undefined ? projection.name : generationKey(projection.name, generation);
  const schema = generation === undefined ? (options.schema ?? 'public') : generationSchema(projection.name, generation);
  const pool = typeof options.postgres === 'string' ? new pg.Pool({ connectionString: options.postgres, max: 1 }) : options.postgres;
  let client: pg.PoolClient | null = null;
  let failed = false;
  try {
    client = await pool.connect();
    const exists = await parkedTableExists(client, tables);
    if (exists && generation !== undefined) await requireRunnable(client, tables, projection.name, generation);
    const ids = options.ids === undefined ? undefined : [...new Set(options.ids.map((id) => id.toLowerCase()))];
    const selected = exists ? await readParkedEvents(client, tables, key, ids === undefined ? {} : { ids }) : [];
    const missing = (ids ?? []).filter((id) => !selected.some((p) => p.eventId === id));
    if (missing.length > 0) throw new ProjectionConfigError('PROJECTION_INVALID_OPTIONS', projection.name, 'ids', `must name parked events; not parked under "${key}": ${missing.join(', ')} — nothing was replayed`);
    const contract = await loadContractStep(options.contracts);
    const deps: ReplayDeps = { client, tables, key, projection, schema, contract, includeSuperseded: options.includeSuperseded === true };
    const outcomes = await replayEach(deps, selected, options, logger);
    const totals = totalsOf(outcomes);
    logger.info('parked events replayed', { projection: projection.name, key, ...totals });
    const resolved = outcomes.length === selected.length && outcomes.every((o) => RESOLVED_KINDS.includes(o.outcome));
    return { projection: projection.name, key, outcomes, totals, resolved };
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // A client whose transaction may be half-way (a failure between statements) is not returned for reuse.
    client?.release(failed ? true : undefined);
    if (pool !== options.postgres) await pool.end();
  }
}
