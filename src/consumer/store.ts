/**
 * The kit's state in PostgreSQL (schema `event_assembler` by default), created idempotently:
 *
 * | table                  | one row per                                   | what for                                   |
 * |------------------------|-----------------------------------------------|--------------------------------------------|
 * | `projection_checkpoints` | projection, partition (`index/count`)       | the `$all` position applied up to; advanced by compare-and-set in each batch's transaction |
 * | `projection_receipts`  | projection, event id                          | "this delivery was applied" (prunable)      |
 * | `projection_entity_versions` | projection, entity type, entity id      | the source version last applied to the entity; `deleted` = tombstone |
 * | `projection_failed_events` | projection, event id                      | parked events, with the diagnosis           |
 * | `projection_generations` | projection, generation                      | which generation serves, which builds, which are kept for rollback (generation-store.ts) |
 *
 * The `projection` column of the first four holds the projection's state key: its name, or
 * `<name>@g<N>` for generation N (generation-store.ts), so each generation has its own checkpoint
 * rows, receipts, entity versions and parked events.
 *
 * Checkpoints here; receipts, entity versions and failed events in store-rows.ts.
 */
import type pg from 'pg';
import type { AllPosition } from './types.js';

export const DEFAULT_STATE_SCHEMA = 'event_assembler';

/** Quoted, schema-qualified table names of one state schema. */
export interface StoreTables {
  readonly schema: string;
  readonly checkpoints: string;
  readonly receipts: string;
  readonly entityVersions: string;
  readonly failedEvents: string;
  readonly generations: string;
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

export function storeTables(schema: string = DEFAULT_STATE_SCHEMA): StoreTables {
  const q = quote(schema);
  return {
    schema,
    checkpoints: `${q}.projection_checkpoints`,
    receipts: `${q}.projection_receipts`,
    entityVersions: `${q}.projection_entity_versions`,
    failedEvents: `${q}.projection_failed_events`,
    generations: `${q}.projection_generations`,
  };
}

/** Creates the schema and its tables when missing. Serialised by an advisory lock: two runners starting at once do not race on `CREATE TABLE IF NOT EXISTS`. */
export async function ensureStore(client: pg.ClientBase, tables: StoreTables): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`event-assembler consumer store ${tables.schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quote(tables.schema)}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${tables.checkpoints} (
      projection text NOT NULL,
      partition text NOT NULL,
      commit_position bigint,
      prepare_position bigint,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (projection, partition))`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${tables.receipts} (
      projection text NOT NULL,
      event_id uuid NOT NULL,
      commit_position bigint NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (projection, event_id))`);
    await client.query(`CREATE INDEX IF NOT EXISTS projection_receipts_applied_at ON ${tables.receipts} (projection, applied_at)`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${tables.entityVersions} (
      projection text NOT NULL,
      entity_type text NOT NULL,
      entity_id text NOT NULL,
      source_system text NOT NULL,
      source_lsn pg_lsn NOT NULL,
      source_kind text NOT NULL CHECK (source_kind IN ('change', 'snapshot')),
      source_generation text,
      source_sequence bigint,
      source_ordinal integer NOT NULL,
      deleted boolean NOT NULL,
      event_id uuid NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (projection, entity_type, entity_id))`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${tables.failedEvents} (
      projection text NOT NULL,
      event_id uuid NOT NULL,
      partition text NOT NULL,
      stream text NOT NULL,
      revision bigint NOT NULL,
      type text NOT NULL,
      commit_position bigint NOT NULL,
      prepare_position bigint NOT NULL,
      data jsonb,
      metadata jsonb NOT NULL,
      error_name text NOT NULL,
      error_message text NOT NULL,
      error_stack text,
      attempts integer NOT NULL,
      parked_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (projection, event_id))`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${tables.generations} (
      projection text NOT NULL,
      generation integer NOT NULL CHECK (generation > 0),
      state text NOT NULL CHECK (state IN ('building', 'serving', 'standby', 'failed')),
      previous integer,
      commit_position bigint,
      prepare_position bigint,
      failure text,
      created_at timestamptz NOT NULL DEFAULT now(),
      switched_at timestamptz,
      PRIMARY KEY (projection, generation))`);
    await client.query(`CREATE UNIQUE INDEX IF NOT EXISTS projection_generations_serving ON ${tables.generations} (projection) WHERE state = 'serving'`);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** Makes sure the partition has a checkpoint row (at "nothing applied" when new). */
export async function ensureCheckpoint(client: pg.ClientBase, tables: StoreTables, projection: string, partition: string): Promise<void> {
  await client.query(`INSERT INTO ${tables.checkpoints} (projection, partition) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [projection, partition]);
}

function positionOf(row: { commit_position: string | null; prepare_position: string | null } | undefined): AllPosition | null {
  if (!row || row.commit_position === null || row.prepare_position === null) return null;
  return { commit: BigInt(row.commit_position), prepare: BigInt(row.prepare_position) };
}

/**
 * The partition's checkpoint. With `lock`, the row stays locked until the transaction ends: the
 * compare of compare-and-set, so a second instance waits here and then sees the moved position.
 */
export async function readCheckpoint(client: pg.ClientBase, tables: StoreTables, projection: string, partition: string, lock = false): Promise<AllPosition | null> {
  const result = await client.query(
    `SELECT commit_position::text, prepare_position::text FROM ${tables.checkpoints} WHERE projection = $1 AND partition = $2${lock ? ' FOR UPDATE' : ''}`,
    [projection, partition],
  );
  return positionOf(result.rows[0]);
}

/** The set of compare-and-set: moves the checkpoint only from `expected`. False when it was elsewhere (or the row is gone). */
export async function advanceCheckpoint(client: pg.ClientBase, tables: StoreTables, projection: string, partition: string, expected: AllPosition | null, next: AllPosition): Promise<boolean> {
  const result = await client.query(
    `UPDATE ${tables.checkpoints} SET commit_position = $3, prepare_position = $4, updated_at = now()
      WHERE projection = $1 AND partition = $2 AND commit_position IS NOT DISTINCT FROM $5::bigint AND prepare_position IS NOT DISTINCT FROM $6::bigint`,
    [projection, partition, next.commit.toString(), next.prepare.toString(), expected?.commit.toString() ?? null, expected?.prepare.toString() ?? null],
  );
  return result.rowCount === 1;
}

/** Whether `a` is at or below `b` in `$all` (commit, then prepare). */
export function samePosition(a: AllPosition | null, b: AllPosition | null): boolean {
  return a === null || b === null ? a === b : a.commit === b.commit && a.prepare === b.prepare;
}

/**
 * Inside a transaction: the checkpoint row (created when missing) locked until the transaction
 * ends, and its position. A second instance of the partition waits here, then finds a position
 * other than the one it expected — the compare-and-set refuses it before any handler runs.
 */
export async function lockCheckpoint(client: pg.ClientBase, tables: StoreTables, projection: string, partition: string): Promise<AllPosition | null> {
  await ensureCheckpoint(client, tables, projection, partition);
  return readCheckpoint(client, tables, projection, partition, true);
}

export function atOrBelow(a: AllPosition, b: AllPosition | null): boolean {
  if (b === null) return false;
  return a.commit < b.commit || (a.commit === b.commit && a.prepare <= b.prepare);
}
