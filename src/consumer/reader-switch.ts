// Switching readers between generations: schema `<name>` holds one view per table of the serving
// generation (`SELECT * FROM "<name>_g<N>".<table>`), dropped and recreated in one transaction.
// Why views and not a renamed schema or search_path: a reader's statement that names a view the
// switch is replacing waits on the view's lock, then PostgreSQL looks the name up again
// (RangeVarGetRelidExtended retries after invalidations) and finds the new view — no error, and
// never a state in between; a schema rename would leave that reader with "relation does not exist".
import type pg from 'pg';
import { ProjectionConfigError, ProjectionGenerationError } from './errors.js';
import { generationSchema, quoteIdent, readerSchema, readGenerations, withStateClient } from './generation-store.js';
import type { StoreTables } from './store.js';
import type { GenerationInfo, RollbackOptions, RollbackResult } from './types.js';

/** Which generation to switch to, decided under the lock from the generations as they are; `previous` is recorded on it (`undefined`: left as it is). */
export type SwitchChoice = (generations: readonly GenerationInfo[]) => { readonly to: number; readonly previous?: number | null };

/** Refuses a readers' schema the kit must not drop views in. */
export function checkReaderSchema(projection: string, stateSchema: string): void {
  const schema = readerSchema(projection);
  if (schema === 'public' || schema === 'information_schema' || schema.startsWith('pg_') || schema === stateSchema) {
    throw new ProjectionConfigError('PROJECTION_INVALID_OPTIONS', projection, 'name', `cannot have generations: readers' views would go in schema "${schema}", which the kit does not own`);
  }
}

async function relations(client: pg.ClientBase, schema: string, kinds: readonly string[]): Promise<string[]> {
  const result = await client.query<{ relname: string }>(
    `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = ANY($2::"char"[]) ORDER BY c.relname`,
    [schema, kinds],
  );
  return result.rows.map((r) => r.relname);
}

/**
 * Points the readers' views at the chosen generation and records it as serving (the one serving
 * before becomes `standby`), in one transaction under the projection's generations lock. Returns
 * the generation switched from (`null`: none served).
 */
export async function switchReaders(client: pg.ClientBase, tables: StoreTables, projection: string, choose: SwitchChoice): Promise<{ to: number; from: number | null }> {
  // A reader holding one view in a transaction while asking for another can deadlock with the
  // switch; PostgreSQL cancels one of the two (40P01). The switch rolled back whole: try again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await switchOnce(client, tables, projection, choose);
    } catch (error) {
      if ((error as { code?: string }).code !== '40P01' || attempt >= SWITCH_ATTEMPTS) throw error;
    }
  }
}

const SWITCH_ATTEMPTS = 3;

async function switchOnce(client: pg.ClientBase, tables: StoreTables, projection: string, choose: SwitchChoice): Promise<{ to: number; from: number | null }> {
  const readers = readerSchema(projection);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`event-assembler generations ${tables.schema}.${projection}`]);
    const generations = await readGenerations(client, tables, projection, true);
    const from = generations.find((g) => g.state === 'serving')?.generation ?? null;
    const { to, previous } = choose(generations);
    const source = generationSchema(projection, to);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(readers)}`);
    for (const view of await relations(client, readers, ['v'])) await client.query(`DROP VIEW ${quoteIdent(readers)}.${quoteIdent(view)}`);
    const sourceTables = await relations(client, source, ['r', 'p', 'v', 'm', 'f']);
    if (sourceTables.length === 0) throw new ProjectionGenerationError(projection, to, `has no tables in schema "${source}" (dropped?); readers were not switched`);
    for (const table of sourceTables) {
      await client.query(`CREATE VIEW ${quoteIdent(readers)}.${quoteIdent(table)} AS SELECT * FROM ${quoteIdent(source)}.${quoteIdent(table)}`);
    }
    await client.query(`UPDATE ${tables.generations} SET state = 'standby' WHERE projection = $1 AND state = 'serving'`, [projection]);
    await client.query(
      `UPDATE ${tables.generations} SET state = 'serving', switched_at = now(), previous = CASE WHEN $3 THEN $4::integer ELSE previous END WHERE projection = $1 AND generation = $2`,
      [projection, to, previous !== undefined, previous ?? null],
    );
    await client.query('COMMIT');
    return { to, from };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * Serves an earlier generation again: by default the one that served before the serving one
 * (`to` names another kept generation). The generation rolled back from stays, `standby`.
 */
export async function rollbackProjection(options: RollbackOptions): Promise<RollbackResult> {
  const { projection } = options;
  return withStateClient(options, async (client, tables) => {
    checkReaderSchema(projection, tables.schema);
    const { to, from } = await switchReaders(client, tables, projection, (generations) => {
      const serving = generations.find((g) => g.state === 'serving');
      if (!serving) throw new ProjectionGenerationError(projection, null, 'no generation serves: nothing to roll back');
      const to = options.to ?? serving.previous;
      if (to === null) throw new ProjectionGenerationError(projection, serving.generation, 'serves and no generation served before it: nothing to roll back to');
      const target = generations.find((g) => g.generation === to);
      if (!target) throw new ProjectionGenerationError(projection, to, 'does not exist');
      if (target.state !== 'standby') throw new ProjectionGenerationError(projection, to, `is ${target.state}; only a generation kept for rollback (standby) can serve again`);
      return { to };
    });
    return { projection, generation: to, from: from! };
  });
}
