// A projection's generations: their names (schema `<name>_g<N>`, state key `<name>@g<N>`, readers'
// schema `<name>`) and their rows in `projection_generations` (table in store.ts). Switching
// readers is reader-switch.ts; loading a generation rebuild.ts.
import pg from 'pg';
import { ProjectionConfigError, ProjectionGenerationError } from './errors.js';
import { DEFAULT_STATE_SCHEMA, ensureStore, storeTables, type StoreTables } from './store.js';
import type { AllPosition, GenerationInfo, GenerationState, GenerationStoreOptions } from './types.js';

/** PostgreSQL truncates longer identifiers silently (NAMEDATALEN − 1 bytes). */
const MAX_IDENTIFIER_BYTES = 63;

/** The schema of generation `generation`'s tables. Throws when the name would be truncated by PostgreSQL. */
export function generationSchema(projection: string, generation: number): string {
  const schema = `${projection}_g${generation}`;
  if (Buffer.byteLength(schema) > MAX_IDENTIFIER_BYTES) {
    throw new ProjectionConfigError('PROJECTION_INVALID_OPTIONS', projection, 'name', `is too long for generations: schema "${schema}" exceeds ${MAX_IDENTIFIER_BYTES} bytes`);
  }
  return schema;
}

/** The generation's key in the state tables: its own checkpoint rows, receipts, entity versions, parked events. */
export function generationKey(projection: string, generation: number): string {
  return `${projection}@g${generation}`;
}

/** The schema readers query: views over the serving generation's tables. */
export function readerSchema(projection: string): string {
  return projection;
}

export function quoteIdent(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

interface GenerationRow {
  projection: string;
  generation: number;
  state: GenerationState;
  previous: number | null;
  commit_position: string | null;
  prepare_position: string | null;
  failure: string | null;
  created_at: Date;
  switched_at: Date | null;
}

const COLUMNS = 'projection, generation, state, previous, commit_position::text, prepare_position::text, failure, created_at, switched_at';

function infoOf(row: GenerationRow): GenerationInfo {
  const position: AllPosition | null = row.commit_position === null || row.prepare_position === null ? null : { commit: BigInt(row.commit_position), prepare: BigInt(row.prepare_position) };
  return {
    projection: row.projection,
    generation: row.generation,
    schema: generationSchema(row.projection, row.generation),
    state: row.state,
    previous: row.previous,
    position,
    failure: row.failure,
    createdAt: row.created_at,
    switchedAt: row.switched_at,
  };
}

/** The projection's generations, oldest first. With `lock`, the rows stay locked until the transaction ends. */
export async function readGenerations(client: pg.ClientBase, tables: StoreTables, projection: string, lock = false): Promise<GenerationInfo[]> {
  const result = await client.query<GenerationRow>(`SELECT ${COLUMNS} FROM ${tables.generations} WHERE projection = $1 ORDER BY generation${lock ? ' FOR UPDATE' : ''}`, [projection]);
  return result.rows.map(infoOf);
}

/** Registers the next generation (one more than any before, failed ones included) as `building`. */
export async function registerGeneration(client: pg.ClientBase, tables: StoreTables, projection: string, position: AllPosition | null): Promise<number> {
  const result = await client.query<{ generation: number }>(
    `INSERT INTO ${tables.generations} (projection, generation, state, commit_position, prepare_position)
     SELECT $1, coalesce(max(generation), 0) + 1, 'building', $2::bigint, $3::bigint FROM ${tables.generations} WHERE projection = $1
     RETURNING generation`,
    [projection, position?.commit.toString() ?? null, position?.prepare.toString() ?? null],
  );
  return result.rows[0]!.generation;
}

/** Marks a generation that was building as failed, with why. */
export async function markFailed(client: pg.ClientBase, tables: StoreTables, projection: string, generation: number, failure: string): Promise<void> {
  await client.query(`UPDATE ${tables.generations} SET state = 'failed', failure = $3 WHERE projection = $1 AND generation = $2 AND state = 'building'`, [projection, generation, failure]);
}

/** Generations left `building` by a rebuild that ended without finishing (the caller holds the rebuild lock, so none is in progress). */
export async function abandonBuilding(client: pg.ClientBase, tables: StoreTables, projection: string): Promise<void> {
  await client.query(`UPDATE ${tables.generations} SET state = 'failed', failure = 'abandoned: its rebuild ended before finishing' WHERE projection = $1 AND state = 'building'`, [projection]);
}

/** Checks that a runner may write into `generation`: it exists and is serving or kept for rollback (not building, not failed). */
export async function requireRunnable(client: pg.ClientBase, tables: StoreTables, projection: string, generation: number): Promise<void> {
  const found = (await readGenerations(client, tables, projection)).find((g) => g.generation === generation);
  if (!found) throw new ProjectionGenerationError(projection, generation, 'does not exist — generations are made by rebuildProjection');
  if (found.state === 'building') throw new ProjectionGenerationError(projection, generation, 'is being built by a rebuild; run it once the rebuild has switched it in');
  if (found.state === 'failed') throw new ProjectionGenerationError(projection, generation, `failed (${found.failure ?? 'no reason recorded'}); run the serving generation or rebuild`);
}

/** Runs `work` on a client of `options.postgres`; with `ensure`, the state tables are created first when missing. */
async function withClient<T>(options: GenerationStoreOptions, ensure: boolean, work: (client: pg.ClientBase, tables: StoreTables) => Promise<T>): Promise<T> {
  const tables = storeTables(options.stateSchema ?? DEFAULT_STATE_SCHEMA);
  const pool = typeof options.postgres === 'string' ? new pg.Pool({ connectionString: options.postgres, max: 1 }) : options.postgres;
  const client = await pool.connect();
  try {
    if (ensure) await ensureStore(client, tables);
    return await work(client, tables);
  } finally {
    client.release();
    if (pool !== options.postgres) await pool.end();
  }
}

/** Runs `work` on a client of `options.postgres`, the state tables ensured. */
export async function withStateClient<T>(options: GenerationStoreOptions, work: (client: pg.ClientBase, tables: StoreTables) => Promise<T>): Promise<T> {
  return withClient(options, true, work);
}

/** The projection's generations, oldest first (for `project generations`). Reads only: none when the state tables do not exist yet. */
export async function listGenerations(options: GenerationStoreOptions & { readonly projection: string }): Promise<GenerationInfo[]> {
  return withClient(options, false, async (client, tables) => {
    const exists = await client.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AS found', [tables.generations]);
    return exists.rows[0]?.found ? readGenerations(client, tables, options.projection) : [];
  });
}

/** The generation readers are served from, or `null` when none has been switched in. */
export async function servingGeneration(options: GenerationStoreOptions & { readonly projection: string }): Promise<number | null> {
  const generations = await listGenerations(options);
  return generations.find((g) => g.state === 'serving')?.generation ?? null;
}
