// Validating a loaded generation before readers are switched to it: (a) the rows of the user's
// table against the live entities the events read leave, (b) a sample of live entities, each row
// compared by the user's check with its source row. The first disagreement fails the rebuild with
// the entity, both rows and what differed.
import type pg from 'pg';
import { ProjectionConfigError, ProjectionValidationError, type ValidationFailureDetails } from './errors.js';
import { quoteIdent } from './generation-store.js';
import { entityKey } from './store-rows.js';
import { compareSourceVersions, versionsComparable } from './source-version.js';
import type { Projection, ProjectionEvent, ProjectionRow, RebuildValidation, SourceVersion } from './types.js';

/** Sampled entities when `check` is given without `sample`. */
export const DEFAULT_SAMPLE = 20;

type Entity = { readonly type: string; readonly id: string };

/**
 * Which entities the events leave alive, by the kit's own rule (apply-batch.ts): an entity's
 * events with a handler or a delete, the last by source version (by arrival when versions do not
 * compare) deciding — a delete leaves it dead. Events without an entity are not counted.
 */
export class EntityTally {
  private readonly entities = new Map<string, { entity: Entity; version: SourceVersion | null; deleted: boolean }>();

  constructor(private readonly projection: Projection<any>) {}

  see(event: ProjectionEvent): void {
    const deletes = this.projection.deletes.has(event.type);
    if (!event.entity || (!deletes && !this.projection.handlers[event.type])) return;
    const key = entityKey(event.entity.type, event.entity.id);
    const before = this.entities.get(key);
    const older = before?.version && event.sourceVersion && versionsComparable(before.version, event.sourceVersion) && compareSourceVersions(event.sourceVersion, before.version) <= 0;
    if (!older) this.entities.set(key, { entity: event.entity, version: event.sourceVersion, deleted: deletes });
  }

  /** Live entities, of `type` when given. */
  live(type?: string): Entity[] {
    return [...this.entities.values()].filter((e) => !e.deleted && (type === undefined || e.entity.type === type)).map((e) => e.entity);
  }
}

/** What is wrong with `validate`, each problem with its field under `validate` (e.g. `sample`); none when it is fine or left out. */
export function validationProblems(validate: RebuildValidation | undefined): { readonly field: string; readonly problem: string }[] {
  if (validate === undefined) return [];
  if (validate === null || typeof validate !== 'object') return [{ field: '', problem: 'must be an object { table, key?, entityType?, sample?, source?, check? }' }];
  const problems: { field: string; problem: string }[] = [];
  const fail = (field: string, problem: string) => void problems.push({ field, problem });
  if (typeof validate.table !== 'string' || validate.table === '') fail('table', 'must name the table holding one row per live entity');
  if (validate.key !== undefined && (typeof validate.key !== 'string' || validate.key === '')) fail('key', 'must name the column holding the entity id');
  if (validate.sample !== undefined && (!Number.isInteger(validate.sample) || validate.sample < 1)) fail('sample', `must be an integer ≥ 1 (found ${String(validate.sample)})`);
  if (validate.sample !== undefined && validate.check === undefined) fail('check', 'is needed to compare the sampled rows');
  else if ((validate.check === undefined) !== (validate.source === undefined)) fail(validate.check ? 'source' : 'check', 'and the other of source/check go together: the check compares a row with its source row');
  if (validate.check !== undefined && typeof validate.check !== 'function') fail('check', 'must be a function');
  if (validate.source !== undefined && typeof validate.source !== 'function') fail('source', 'must be a function');
  return problems;
}

/** Checks `validate` once, before anything is built; names the field of the first problem. */
export function checkValidation(projection: string, validate: RebuildValidation | undefined): void {
  const [first] = validationProblems(validate);
  if (first) throw new ProjectionConfigError('PROJECTION_INVALID_OPTIONS', projection, first.field ? `validate.${first.field}` : 'validate', first.problem);
}

/** `count` entities picked at random (Fisher–Yates, partial). */
function pick<T>(items: readonly T[], count: number): T[] {
  const copy = [...items];
  const n = Math.min(count, copy.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(Math.random() * (copy.length - i));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, n);
}

function describe(error: unknown): string {
  return error instanceof Error ? `the check threw: ${error.message}` : `the check threw: ${String(error)}`;
}

export interface ValidationContext {
  readonly client: pg.ClientBase;
  /** The generation's schema. */
  readonly schema: string;
  readonly failure: Omit<ValidationFailureDetails, 'check' | 'entity' | 'row' | 'source' | 'difference'>;
  readonly parked: number;
}

/** Validates the loaded generation; throws `ProjectionValidationError` on the first disagreement. Returns what was compared. */
export async function validateGeneration(ctx: ValidationContext, validate: RebuildValidation, tally: EntityTally): Promise<{ entities: number; rows: number; sampled: number }> {
  const fail = (details: Pick<ValidationFailureDetails, 'check' | 'difference'> & Partial<ValidationFailureDetails>): never => {
    throw new ProjectionValidationError({ entity: null, row: null, source: null, ...ctx.failure, ...details });
  };
  if (ctx.parked > 0) fail({ check: 'parked', difference: `${ctx.parked} event(s) were parked while loading (see projection_failed_events under ${ctx.failure.projection}@g${ctx.failure.generation})` });
  const table = `${quoteIdent(ctx.schema)}.${quoteIdent(validate.table)}`;
  const live = tally.live(validate.entityType);
  const rows = Number((await ctx.client.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table}`)).rows[0]!.n);
  if (rows !== live.length) {
    const of = validate.entityType ? ` of type ${validate.entityType}` : '';
    fail({ check: 'count', difference: `table ${validate.table} has ${rows} row(s), the events read leave ${live.length} live entit${live.length === 1 ? 'y' : 'ies'}${of}` });
  }
  if (!validate.check || !validate.source) return { entities: live.length, rows, sampled: 0 };
  const key = quoteIdent(validate.key ?? 'id');
  const sampled = pick(live, validate.sample ?? DEFAULT_SAMPLE);
  for (const entity of sampled) {
    const found = await ctx.client.query<ProjectionRow>(`SELECT * FROM ${table} WHERE ${key}::text = $1`, [entity.id]);
    const row = found.rows[0];
    const source = (await validate.source(entity)) ?? null;
    if (!row) fail({ check: 'sample', entity, source, difference: `no row in ${validate.table} with ${validate.key ?? 'id'} = ${entity.id}` });
    let difference: string | null;
    try {
      difference = (await validate.check(row!, source, entity)) || null;
    } catch (error) {
      difference = describe(error);
    }
    if (difference !== null) fail({ check: 'sample', entity, row: row!, source, difference });
  }
  return { entities: live.length, rows, sampled: sampled.length };
}
