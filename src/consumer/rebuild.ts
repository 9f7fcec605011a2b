// rebuildProjection: a new generation built beside the serving one, loaded to a freshness point
// (rebuild-load.ts), validated (rebuild-validate.ts), then switched in for readers in one
// transaction (reader-switch.ts); the generation that served is kept for rollbackProjection.
import { KurrentDBClient } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { loadContractStep } from './contract-step.js';
import { checkCommonOptions } from './options-check.js';
import { ProjectionGenerationError } from './errors.js';
import { abandonBuilding, generationKey, generationSchema, markFailed, quoteIdent, readerSchema, registerGeneration, withStateClient } from './generation-store.js';
import { partitionKey } from './partition.js';
import { checkReaderSchema, switchReaders } from './reader-switch.js';
import { headOf, loadGeneration } from './rebuild-load.js';
import { checkValidation, validateGeneration } from './rebuild-validate.js';
import { ensureCheckpoint, type StoreTables } from './store.js';
import type { AllPosition, Projection, ProjectionLogger, RebuildOptions, RebuildProgress, RebuildResult } from './types.js';

const silent: ProjectionLogger = { info() {}, warn() {}, error() {} };

function checkOptions(options: RebuildOptions): void {
  const fail = checkCommonOptions(options);
  const to = options.to;
  if (to !== undefined && to !== 'head' && (typeof to?.commit !== 'bigint' || typeof to?.prepare !== 'bigint')) fail('to', "must be 'head' or a $all position { commit: bigint, prepare: bigint }");
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') fail('onProgress', 'must be a function');
  checkValidation(options.projection.name, options.validate);
}

/** Creates the generation's schema (it must not exist) and runs the projection's setup in it, with its checkpoint rows, in one transaction. */
async function createGenerationSchema(client: pg.ClientBase, tables: StoreTables, projection: Projection<any>, generation: number): Promise<void> {
  const schema = generationSchema(projection.name, generation);
  const key = generationKey(projection.name, generation);
  await client.query('BEGIN');
  try {
    await client.query(`CREATE SCHEMA ${quoteIdent(schema)}`);
    if (projection.setup) await projection.setup(client, schema);
    for (let index = 0; index < projection.partition.count; index++) await ensureCheckpoint(client, tables, key, partitionKey({ count: projection.partition.count, index }));
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** Registers, creates, loads and validates generation N+1, then switches readers to it. Runs under the rebuild lock. */
async function build(client: pg.ClientBase, tables: StoreTables, kurrent: KurrentDBClient, options: RebuildOptions): Promise<RebuildResult> {
  const { projection } = options;
  const logger = options.logger ?? silent;
  const signal = options.signal ?? new AbortController().signal;
  await abandonBuilding(client, tables, projection.name);
  const to: AllPosition | null = options.to === undefined || options.to === 'head' ? await headOf(kurrent) : options.to;
  const generation = await registerGeneration(client, tables, projection.name, to);
  const schema = generationSchema(projection.name, generation);
  logger.info('rebuild started', { projection: projection.name, generation, to });
  const progress = (phase: RebuildProgress['phase'], read: number, position: AllPosition | null) => options.onProgress?.({ projection: projection.name, generation, phase, read, position, to });
  try {
    progress('loading', 0, null);
    const contract = await loadContractStep(options.contracts);
    await createGenerationSchema(client, tables, projection, generation);
    const target = { projection, tables, schema, key: generationKey(projection.name, generation) };
    const loaded = await loadGeneration(kurrent, { client, target, contract, logger, signal }, to, (read, position) => progress('loading', read, position));
    const serving = (await client.query<{ generation: number }>(`SELECT generation FROM ${tables.generations} WHERE projection = $1 AND state = 'serving'`, [projection.name])).rows[0]?.generation ?? null;
    signal.throwIfAborted();
    progress('validating', loaded.read, to);
    const validation = options.validate
      ? await validateGeneration({ client, schema, parked: loaded.totals.parked, failure: { projection: projection.name, generation, serving } }, options.validate, loaded.tally)
      : null;
    signal.throwIfAborted();
    progress('switching', loaded.read, to);
    const { from } = await switchReaders(client, tables, projection.name, (generations) => {
      const self = generations.find((g) => g.generation === generation);
      if (self?.state !== 'building') throw new ProjectionGenerationError(projection.name, generation, `is ${self?.state ?? 'gone'}, no longer building; readers were not switched`);
      return { to: generation, previous: generations.find((g) => g.state === 'serving')?.generation ?? null };
    });
    const { totals } = loaded;
    const skipped = totals.skipped.position + totals.skipped.receipt + totals.skipped.entityVersion;
    logger.info('rebuild switched readers', { projection: projection.name, generation, from, events: loaded.read });
    return {
      projection: projection.name,
      generation,
      previous: from,
      readerSchema: readerSchema(projection.name),
      position: to,
      events: { read: loaded.read, applied: totals.applied, unhandled: totals.unhandled, skipped, parked: totals.parked },
      validation,
    };
  } catch (error) {
    await markFailed(client, tables, projection.name, generation, error instanceof Error ? error.message : String(error)).catch(() => undefined);
    logger.error('rebuild failed', { projection: projection.name, generation, schema, error });
    throw error;
  }
}

/**
 * Builds generation N+1 of `projection` in schema `<name>_g<N+1>` while N keeps serving: loads it
 * from `$all` position 0 up to `to` (default: the head when the rebuild starts), validates it
 * (`validate`), then switches readers' views (`<name>`) to it in one transaction and keeps N,
 * `standby`, for `rollbackProjection`. A failed validation (`ProjectionValidationError`) or any
 * other failure leaves N serving and the new generation `failed`, its schema kept for inspection.
 * One rebuild per projection at a time (`ProjectionGenerationError` otherwise).
 */
export async function rebuildProjection(options: RebuildOptions): Promise<RebuildResult> {
  checkOptions(options);
  const { projection } = options;
  return withStateClient(options, async (client, tables) => {
    checkReaderSchema(projection.name, tables.schema);
    const lock = `event-assembler rebuild ${tables.schema}.${projection.name}`;
    const locked = (await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [lock])).rows[0]!.ok;
    if (!locked) throw new ProjectionGenerationError(projection.name, null, 'another rebuild is running; wait for it to end');
    const kurrent = KurrentDBClient.connectionString(options.kurrentdb);
    try {
      return await build(client, tables, kurrent, options);
    } finally {
      await kurrent.dispose().catch(() => undefined);
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [lock]).catch(() => undefined);
    }
  });
}
