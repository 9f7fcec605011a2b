// Parked events as stored in `projection_failed_events` (written by poison.ts through
// store-rows.ts `parkEvent`): read back, listed for people, and turned into the recorded event a
// replay applies (replay-parked.ts).
import pg from 'pg';
import { generationKey } from './generation-store.js';
import type { RecordedInput } from './projection-event.js';
import { DEFAULT_STATE_SCHEMA, storeTables, type StoreTables } from './store.js';
import type { AllPosition } from './types.js';

/** One parked event: the event as recorded and why it was parked. */
export interface ParkedEvent {
  /** The state key it is parked under: the projection's name, or `<name>@g<N>`. */
  readonly projection: string;
  readonly eventId: string;
  /** The partition (`index/count`) whose runner parked it: its checkpoint row is the one a replay locks. */
  readonly partition: string;
  readonly stream: string;
  readonly revision: bigint;
  readonly type: string;
  readonly position: AllPosition;
  /** The data as recorded (before contracts and upcasting). */
  readonly data: unknown;
  readonly metadata: Readonly<Record<string, unknown>>;
  /** The last failure: when parked, or of the last replay that failed again. */
  readonly error: { readonly name: string; readonly message: string; readonly stack: string | null };
  /** Handler runs that failed, replays included. */
  readonly attempts: number;
  /** When it was parked, or last failed a replay. */
  readonly parkedAt: Date;
}

interface ParkedRow {
  projection: string;
  event_id: string;
  partition: string;
  stream: string;
  revision: string;
  type: string;
  commit_position: string;
  prepare_position: string;
  data: unknown;
  metadata: Record<string, unknown>;
  error_name: string;
  error_message: string;
  error_stack: string | null;
  attempts: number;
  parked_at: Date;
}

const COLUMNS = `projection, event_id::text, partition, stream, revision::text, type, commit_position::text, prepare_position::text,
  data, metadata, error_name, error_message, error_stack, attempts, parked_at`;

function parkedOf(row: ParkedRow): ParkedEvent {
  return {
    projection: row.projection,
    eventId: row.event_id,
    partition: row.partition,
    stream: row.stream,
    revision: BigInt(row.revision),
    type: row.type,
    position: { commit: BigInt(row.commit_position), prepare: BigInt(row.prepare_position) },
    data: row.data,
    metadata: row.metadata,
    error: { name: row.error_name, message: row.error_message, stack: row.error_stack },
    attempts: row.attempts,
    parkedAt: row.parked_at,
  };
}

/**
 * The parked events of state key `key`, oldest `$all` position first; only `ids` when given. With
 * `lock`, the rows stay locked until the transaction ends (two replays of one event take turns).
 */
export async function readParkedEvents(client: pg.ClientBase, tables: StoreTables, key: string, options: { readonly ids?: readonly string[]; readonly lock?: boolean } = {}): Promise<ParkedEvent[]> {
  const byId = options.ids === undefined ? '' : ' AND f.event_id = ANY($2::uuid[])';
  // Qualified: a bare ORDER BY commit_position would sort the text output column of that name.
  const result = await client.query<ParkedRow>(
    `SELECT ${COLUMNS} FROM ${tables.failedEvents} f WHERE f.projection = $1${byId} ORDER BY f.commit_position, f.prepare_position, f.event_id${options.lock ? ' FOR UPDATE' : ''}`,
    options.ids === undefined ? [key] : [key, options.ids],
  );
  return result.rows.map(parkedOf);
}

/** Whether the state tables exist (listing creates nothing). */
export async function parkedTableExists(client: pg.ClientBase, tables: StoreTables): Promise<boolean> {
  const result = await client.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AS found', [tables.failedEvents, tables.checkpoints]);
  return result.rows[0]?.found === true;
}

export async function deleteParkedEvent(client: pg.ClientBase, tables: StoreTables, key: string, eventId: string): Promise<void> {
  await client.query(`DELETE FROM ${tables.failedEvents} WHERE projection = $1 AND event_id = $2`, [key, eventId]);
}

/** The event as it arrived, rebuilt from its parked row: what `toProjectionEvent` reads. */
export function recordedOfParked(parked: ParkedEvent): RecordedInput {
  return { id: parked.eventId, type: parked.type, stream: parked.stream, revision: parked.revision, position: parked.position, data: parked.data, metadata: parked.metadata };
}

export interface ListParkedOptions {
  /** A connection string or a pool (not ended here). */
  readonly postgres: string | pg.Pool;
  /** The projection's name. */
  readonly projection: string;
  /** The generation whose parked events to list (state key `<name>@g<N>`). @default the projection without generations */
  readonly generation?: number;
  /** @default 'event_assembler' */
  readonly stateSchema?: string;
}

/** The projection's parked events (every partition), oldest first. Reads only: none when the state tables do not exist. */
export async function listParkedEvents(options: ListParkedOptions): Promise<ParkedEvent[]> {
  const tables = storeTables(options.stateSchema ?? DEFAULT_STATE_SCHEMA);
  const key = options.generation === undefined ? options.projection : generationKey(options.projection, options.generation);
  const pool = typeof options.postgres === 'string' ? new pg.Pool({ connectionString: options.postgres, max: 1 }) : options.postgres;
  try {
    const client = await pool.connect();
    try {
      return (await parkedTableExists(client, tables)) ? await readParkedEvents(client, tables, key) : [];
    } finally {
      client.release();
    }
  } finally {
    if (pool !== options.postgres) await pool.end();
  }
}
