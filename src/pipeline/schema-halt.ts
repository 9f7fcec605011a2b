/**
 * A required column changed shape: the source says which table and column (it knows columns,
 * not mappers), but the operator's fix is a change to a mapper — so the fatal error names the
 * mappers that allowlist the column. Same code, same details, plus `mappers`.
 */
import { SchemaChangeError, TableRenamedError } from '../errors.js';
import type { AnyMapper } from '../mapping/index.js';

/**
 * `error` with the mappers named: those that allowlist its column for a {@link SchemaChangeError},
 * those that read the table under its old name for a {@link TableRenamedError}; any other error unchanged.
 */
export function nameSchemaChangeMappers(error: unknown, mappers: readonly AnyMapper[]): unknown {
  if (error instanceof TableRenamedError && error.details.mappers === undefined) {
    return new TableRenamedError({ ...error.details, mappers: mappers.filter((m) => m.tables[error.details.from] !== undefined).map((m) => m.name) });
  }
  if (!(error instanceof SchemaChangeError) || error.details.mappers !== undefined) return error;
  const names = mappers.filter((m) => m.tables[error.table]?.columns.includes(error.column) === true).map((m) => m.name);
  return new SchemaChangeError(error.code, { ...error.details, mappers: names });
}
