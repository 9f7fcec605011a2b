// The per-event rows of the kit's state (tables in store.ts): receipts, entity versions (with
// tombstones), parked events — read and written a batch at a time — and receipt pruning.
import pg from 'pg';
import { describeCause } from '../mapping/failed-record.js';
import { DEFAULT_STATE_SCHEMA, storeTables, type StoreTables } from './store.js';
import type { ProjectionEvent, SourceVersion } from './types.js';

/** Which of `ids` already have a receipt. */
export async function existingReceipts(client: pg.ClientBase, tables: StoreTables, projection: string, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const result = await client.query<{ event_id: string }>(`SELECT event_id::text FROM ${tables.receipts} WHERE projection = $1 AND event_id = ANY($2::uuid[])`, [projection, ids]);
  return new Set(result.rows.map((r) => r.event_id));
}

export async function insertReceipts(client: pg.ClientBase, tables: StoreTables, projection: string, events: readonly ProjectionEvent[]): Promise<void> {
  if (events.length === 0) return;
  await client.query(
    `INSERT INTO ${tables.receipts} (projection, event_id, commit_position)
     SELECT $1, id, pos FROM unnest($2::uuid[], $3::bigint[]) AS t(id, pos)`,
    [projection, events.map((e) => e.id), events.map((e) => e.position.commit.toString())],
  );
}

/** What is recorded of an entity: the last applied source version and whether it is deleted. */
export interface EntityState {
  readonly version: SourceVersion;
  readonly deleted: boolean;
}

export function entityKey(type: string, id: string): string {
  return JSON.stringify([type, id]);
}

interface EntityRow {
  entity_type: string;
  entity_id: string;
  source_system: string;
  source_lsn: string;
  source_kind: 'change' | 'snapshot';
  source_generation: string | null;
  source_sequence: string | null;
  source_ordinal: number;
  deleted: boolean;
}

/** The recorded state of these entities, locked for the transaction (another partition touching the same entity waits). */
export async function entityStates(
  client: pg.ClientBase,
  tables: StoreTables,
  projection: string,
  entities: readonly { readonly type: string; readonly id: string }[],
): Promise<Map<string, EntityState>> {
  const states = new Map<string, EntityState>();
  if (entities.length === 0) return states;
  const result = await client.query<EntityRow>(
    `SELECT entity_type, entity_id, source_system, source_lsn::text, source_kind, source_generation, source_sequence::text, source_ordinal, deleted
       FROM ${tables.entityVersions}
      WHERE projection = $1 AND (entity_type, entity_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))
      ORDER BY entity_type, entity_id
      FOR UPDATE`,
    [projection, entities.map((e) => e.type), entities.map((e) => e.id)],
  );
  for (const row of result.rows) {
    const version: SourceVersion = {
      systemId: row.source_system,
      lsn: row.source_lsn,
      kind: row.source_kind,
      generation: row.source_generation,
      sequence: row.source_sequence === null ? null : Number(row.source_sequence),
      ordinal: row.source_ordinal,
    };
    states.set(entityKey(row.entity_type, row.entity_id), { version, deleted: row.deleted });
  }
  return states;
}

/** One entity's new state, with the event that set it. */
export interface EntityWrite extends EntityState {
  readonly type: string;
  readonly id: string;
  readonly eventId: string;
}

export async function writeEntityStates(client: pg.ClientBase, tables: StoreTables, projection: string, writes: readonly EntityWrite[]): Promise<void> {
  if (writes.length === 0) return;
  const column = <T>(pick: (w: EntityWrite) => T): T[] => writes.map(pick);
  await client.query(
    `INSERT INTO ${tables.entityVersions}
       (projection, entity_type, entity_id, source_system, source_lsn, source_kind, source_generation, source_sequence, source_ordinal, deleted, event_id)
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::pg_lsn[], $6::text[], $7::text[], $8::bigint[], $9::integer[], $10::boolean[], $11::uuid[])
     ON CONFLICT (projection, entity_type, entity_id) DO UPDATE SET
       source_system = EXCLUDED.source_system, source_lsn = EXCLUDED.source_lsn, source_kind = EXCLUDED.source_kind,
       source_generation = EXCLUDED.source_generation, source_sequence = EXCLUDED.source_sequence, source_ordinal = EXCLUDED.source_ordinal,
       deleted = EXCLUDED.deleted, event_id = EXCLUDED.event_id, updated_at = now()`,
    [
      projection,
      column((w) => w.type),
      column((w) => w.id),
      column((w) => w.version.systemId),
      column((w) => w.version.lsn),
      column((w) => w.version.kind),
      column((w) => w.version.generation),
      column((w) => (w.version.sequence === null ? null : String(w.version.sequence))),
      column((w) => w.version.ordinal),
      column((w) => w.deleted),
      column((w) => w.eventId),
    ],
  );
}

/** Parks an event: its data, metadata and the diagnosis. A second failure of the same event (a replay) updates the row. */
export async function parkEvent(
  client: pg.ClientBase,
  tables: StoreTables,
  projection: string,
  partition: string,
  event: ProjectionEvent,
  error: unknown,
  attempts: number,
): Promise<void> {
  const cause = describeCause(error);
  await client.query(
    `INSERT INTO ${tables.failedEvents}
       (projection, event_id, partition, stream, revision, type, commit_position, prepare_position, data, metadata, error_name, error_message, error_stack, attempts)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
     ON CONFLICT (projection, event_id) DO UPDATE SET
       error_name = EXCLUDED.error_name, error_message = EXCLUDED.error_message, error_stack = EXCLUDED.error_stack,
       attempts = ${tables.failedEvents}.attempts + EXCLUDED.attempts, parked_at = now()`,
    [
      projection,
      event.id,
      partition,
      event.stream,
      event.revision.toString(),
      event.type,
      event.position.commit.toString(),
      event.position.prepare.toString(),
      JSON.stringify(event.data ?? null),
      JSON.stringify(event.metadata),
      cause.name,
      cause.message,
      error instanceof Error ? (error.stack ?? null) : null,
      attempts,
    ],
  );
}

export interface PruneReceiptsOptions {
  /** A connection string or a pool (not ended here). */
  readonly postgres: string | pg.Pool;
  readonly projection: string;
  /** Receipts applied before this moment are deleted. */
  readonly appliedBefore: Date;
  /** @default 'event_assembler' */
  readonly stateSchema?: string;
}

/**
 * Deletes old receipts of one projection; returns how many. After pruning, a replay of those
 * events is still recognised by the checkpoint (from the checkpoint on) and by entity versions
 * (events with a comparable source version) — see docs/consumers.md, "Which guard covers which replay".
 */
export async function pruneReceipts(options: PruneReceiptsOptions): Promise<number> {
  const tables = storeTables(options.stateSchema ?? DEFAULT_STATE_SCHEMA);
  const pool = typeof options.postgres === 'string' ? new pg.Pool({ connectionString: options.postgres, max: 1 }) : options.postgres;
  try {
    const result = await pool.query(`DELETE FROM ${tables.receipts} WHERE projection = $1 AND applied_at < $2`, [options.projection, options.appliedBefore]);
    return result.rowCount ?? 0;
  } finally {
    if (pool !== options.postgres) await pool.end();
  }
}
