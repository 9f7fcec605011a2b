// What every entry point of the kit (the runner, a rebuild) checks first: a projection made with
// defineProjection, a PostgreSQL to write to and a KurrentDB to read from — each problem named
// with its field, as a ProjectionConfigError.
import pg from 'pg';
import { ProjectionConfigError } from './errors.js';
import type { Projection } from './types.js';

export type FailOption = (field: string, problem: string) => never;

/** Checks the projection and both connections; gives the `fail` the caller's own checks use. */
export function checkCommonOptions(options: { readonly projection: Projection<any>; readonly postgres: string | pg.Pool; readonly kurrentdb: string }): FailOption {
  const name = options?.projection?.name ?? '(none)';
  const fail: FailOption = (field, problem) => {
    throw new ProjectionConfigError('PROJECTION_INVALID_OPTIONS', name, field, problem);
  };
  if (!options?.projection || !(options.projection.deletes instanceof Set)) fail('projection', 'must be made with defineProjection({ … })');
  if (typeof options.postgres !== 'string' && !(options.postgres instanceof pg.Pool)) fail('postgres', 'must be a connection string or a pg.Pool');
  if (typeof options.kurrentdb !== 'string' || options.kurrentdb === '') fail('kurrentdb', 'must be a KurrentDB connection string (e.g. kurrentdb://localhost:2113?tls=false)');
  return fail;
}

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;

/** `stateSchema` and `schema`, when given, are plain PostgreSQL identifiers (they are quoted into SQL). */
export function checkSchemaNames(options: { readonly stateSchema?: string; readonly schema?: string }, fail: FailOption): void {
  for (const field of ['stateSchema', 'schema'] as const) {
    const value = options[field];
    if (value !== undefined && (typeof value !== 'string' || !SCHEMA_NAME.test(value))) fail(field, 'must be a plain PostgreSQL identifier');
  }
}
