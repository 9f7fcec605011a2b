// createProjectionRunner: wiring and lifecycle only. The transport is event-feed.ts, a batch's
// transaction apply-batch.ts, failing handlers poison.ts, the state tables store.ts, generations
// (option `generation`) generation-store.ts.
import { KurrentDBClient } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { stateKey, type BatchTarget } from './apply-batch.js';
import { loadContractStep } from './contract-step.js';
import { checkCommonOptions, checkSchemaNames } from './options-check.js';
import { carriedUnits, openEventFeed, type EventFeed } from './event-feed.js';
import { generationKey, generationSchema, readGenerations, requireRunnable } from './generation-store.js';
import { awaitLease, leaseHolder, leaseName, releaseLease } from './lease.js';
import { ProjectionLeaseHeldError } from './errors.js';
import { partitionKey } from './partition.js';
import { applyAtomic, applyRecovering, emptyTotals, StopRequested, type BatchDeps, type Totals } from './poison.js';
import { DEFAULT_STATE_SCHEMA, ensureCheckpoint, ensureStore, readCheckpoint, storeTables, type StoreTables } from './store.js';
import type { AllPosition, ProjectionLogger, ProjectionRunner, ProjectionRunnerOptions, ProjectionStatus, RunnerState } from './types.js';

/** How often a standby tries the partition's lease. */
export const DEFAULT_STANDBY_POLL_MS = 1_000;

const silent: ProjectionLogger = { info() {}, warn() {}, error() {} };

function checkOptions(options: ProjectionRunnerOptions): void {
  const fail = checkCommonOptions(options);
  checkSchemaNames(options, fail);
  if (options.contracts !== undefined && typeof options.contracts?.dir !== 'string') fail('contracts.dir', 'must be the contracts directory');
  if (options.generation !== undefined && options.generation !== 'serving') {
    if (!Number.isInteger(options.generation) || options.generation < 1) fail('generation', `must be an integer ≥ 1 or 'serving' (found ${String(options.generation)})`);
    if (options.schema !== undefined) fail('schema', "does not go with generation: a generation's tables are in schema <name>_g<N>");
  }
  if (options.standby !== undefined && typeof options.standby !== 'boolean') fail('standby', `must be true or false (found ${String(options.standby)})`);
  const poll = options.standbyPollMs;
  if (poll !== undefined && (!Number.isInteger(poll) || poll < 10)) fail('standbyPollMs', `must be an integer ≥ 10 (found ${String(poll)})`);
}

/** Where the runner writes: generation N's schema and state key, or `schema` and the projection's name. */
function targetOf(options: ProjectionRunnerOptions, tables: StoreTables, generation: number | null): BatchTarget {
  const { projection } = options;
  if (generation === null) return { projection, tables, schema: options.schema ?? 'public' };
  return { projection, tables, schema: generationSchema(projection.name, generation), key: generationKey(projection.name, generation) };
}

/** The generation to write into (`null`: none), `'serving'` resolved; checks that a runner may write into it. */
async function resolveGeneration(client: pg.ClientBase, tables: StoreTables, projection: string, generation: number | 'serving' | undefined): Promise<number | null> {
  if (generation === undefined) return null;
  if (generation === 'serving') return (await readGenerations(client, tables, projection)).find((g) => g.state === 'serving')?.generation ?? null;
  await requireRunnable(client, tables, projection, generation);
  return generation;
}

/** Creates the projection's tables (its `setup`, in a transaction) and its checkpoint row, and returns the stored checkpoint. */
async function prepare(client: pg.ClientBase, target: BatchTarget): Promise<AllPosition | null> {
  const { tables, projection, schema } = target;
  const key = stateKey(target);
  await client.query('BEGIN');
  try {
    // Instances starting at once would race on CREATE … IF NOT EXISTS (a duplicate-key error on
    // pg_type): the projection's setup runs under a lock of its own.
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`event-assembler projection setup ${schema}.${projection.name}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    if (projection.setup) await projection.setup(client, schema);
    await ensureCheckpoint(client, tables, key, partitionKey(projection.partition));
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
  return readCheckpoint(client, tables, key, partitionKey(projection.partition));
}

/** Runs one projection partition: subscribe after the checkpoint, apply batches until stopped or failed. */
export function createProjectionRunner(options: ProjectionRunnerOptions): ProjectionRunner {
  checkOptions(options);
  const { projection } = options;
  const logger = options.logger ?? silent;
  const tables = storeTables(options.stateSchema ?? DEFAULT_STATE_SCHEMA);
  const partition = partitionKey(projection.partition);
  const totals: Totals = emptyTotals();
  const abort = new AbortController();
  let state: RunnerState = 'idle';
  let position: AllPosition | null = null;
  let failure: Error | null = null;
  let feed: EventFeed | null = null;
  let running: Promise<void> | null = null;
  let lease: string | null = null;
  let lost: Error | null = null;

  async function loop(client: pg.ClientBase): Promise<void> {
    await ensureStore(client, tables);
    const generation = await resolveGeneration(client, tables, projection.name, options.generation);
    const target = targetOf(options, tables, generation);
    lease = leaseName(tables.schema, stateKey(target), partition);
    if (!(await takeLease(client, lease))) return;
    position = await prepare(client, target);
    const contract = await loadContractStep(options.contracts);
    if (abort.signal.aborted) return;
    const kurrent = KurrentDBClient.connectionString(options.kurrentdb);
    try {
      const atomic = projection.atomic === 'transaction';
      feed = openEventFeed(kurrent, projection, position, { logger, ...(atomic ? { carried: await carriedUnits(kurrent, position) } : {}) });
      state = 'running';
      logger.info('projection running', { projection: projection.name, partition, from: position, generation, schema: target.schema, atomic: projection.atomic });
      const deps: BatchDeps = { client, target, contract, totals, logger, signal: abort.signal };
      while (!abort.signal.aborted) {
        const batch = await feed.next(projection.batchSize);
        if (batch === null) break;
        position = atomic ? await applyAtomic(deps, position, batch) : await applyRecovering(deps, position, batch.events);
      }
      if (lost) throw lost;
      if (feed.error && !abort.signal.aborted) throw feed.error;
    } finally {
      await feed?.close();
      await kurrent.dispose().catch(() => undefined);
    }
  }

  /** The partition's lease: taken, waited for as a standby (false: stopped while waiting), or refused with ProjectionLeaseHeldError. */
  async function takeLease(client: pg.ClientBase, name: string): Promise<boolean> {
    const standby = options.standby === true;
    const fields = { projection: projection.name, partition };
    const taken = await awaitLease(client, name, standby ? (options.standbyPollMs ?? DEFAULT_STANDBY_POLL_MS) : 0, abort.signal, async () => {
      const holder = await leaseHolder(client, name);
      if (!standby) throw new ProjectionLeaseHeldError(projection.name, partition, holder);
      state = 'standby';
      logger.info('projection standing by: another instance is active on this partition', { ...fields, holder });
    });
    if (taken && state === 'standby') {
      state = 'starting';
      logger.info('projection taking over: the active instance is gone', fields);
    }
    return taken;
  }

  async function run(): Promise<void> {
    const pool = typeof options.postgres === 'string' ? new pg.Pool({ connectionString: options.postgres, max: 1 }) : options.postgres;
    let client: pg.PoolClient | null = null;
    // A connection lost while the runner waits for events (no query running to fail) ends the run
    // now, not at the next batch: its lease is gone with the session, and a standby may take over.
    const onLost = (error: Error) => {
      lost ??= error;
      void feed?.close();
    };
    try {
      client = await pool.connect();
      client.on('error', onLost);
      await loop(client);
      state = 'stopped';
      logger.info('projection stopped', { projection: projection.name, partition, position, applied: totals.applied });
    } catch (error) {
      if (error instanceof StopRequested) {
        state = 'stopped';
        return;
      }
      failure = error as Error;
      state = 'failed';
      logger.error('projection failed', { projection: projection.name, partition, position, error: failure });
      throw error;
    } finally {
      // A client whose transaction may be half-way (a failure between statements) is not returned
      // for reuse; one returned gives its lease back first.
      client?.off('error', onLost);
      let reusable = state !== 'failed';
      if (client && lease && reusable) await releaseLease(client, lease).catch(() => (reusable = false));
      client?.release(reusable ? undefined : true);
      if (pool !== options.postgres) await pool.end();
    }
  }

  return {
    run() {
      if (running) throw new Error(`projection "${projection.name}" partition ${partition}: run() was already called`);
      state = 'starting';
      running = run();
      return running;
    },
    async stop() {
      if (state === 'running' || state === 'starting' || state === 'standby') state = 'stopping';
      abort.abort();
      await feed?.close();
      await running?.catch(() => undefined);
    },
    status(): ProjectionStatus {
      return {
        projection: projection.name,
        partition,
        state,
        position,
        applied: totals.applied,
        unhandled: totals.unhandled,
        skipped: { ...totals.skipped },
        parked: totals.parked,
        batches: totals.batches,
        caughtUp: feed?.caughtUp ?? false,
        queued: feed?.queued ?? 0,
        openTransactions: feed?.openTransactions ?? 0,
        error: failure,
      };
    },
  };
}
