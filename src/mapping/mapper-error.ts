import { EventAssemblerError } from '../errors.js';
import type { FailureDiagnosis, MapperOutputErrorDetails } from './types.js';

/**
 * A mapper threw (or returned something that is not a valid event) and its policy is `halt`:
 * the line stops here with a diagnosis — mapper, source position, tables, allowlisted keys
 * and the cause's message. The cause itself rides in `cause`.
 */
export class MapperError extends EventAssemblerError {
  declare readonly code: 'MAPPER_FAILED';
  declare readonly details: FailureDiagnosis;
  readonly mapper: string;

  constructor(diagnosis: FailureDiagnosis, options?: { cause?: unknown }) {
    super(
      'MAPPER_FAILED',
      `${describeFailure(diagnosis)}. Nothing of this ${diagnosis.origin === 'change' ? 'transaction' : 'snapshot record'} was appended — ` +
        "fix: fix the mapper (or give it onError: 'park' to park such input as MapperFailed records) and start again: it is read again from where it stopped",
      diagnosis,
      options,
    );
    this.mapper = diagnosis.mapper;
  }
}

/** A mapper declaration is invalid; `details.field` names the field (e.g. `tables['public.invoice'].before[0]`). */
export class MapperConfigError extends EventAssemblerError {
  declare readonly code: 'MAPPER_CONFIG_INVALID';
  declare readonly details: { readonly mapper: string; readonly field: string; readonly problem: string };

  constructor(mapper: string, field: string, problem: string) {
    super('MAPPER_CONFIG_INVALID', `mapper "${mapper}": ${field}: ${problem}`, { mapper, field, problem });
  }
}

/**
 * A mapper returned something that is not a valid event: a value JSON cannot carry (a bigint, a
 * Date, `undefined`, NaN, a function, …) or a stream name with `undefined`/`null`/`NaN`
 * interpolated into it. Thrown inside the mapping, so it follows the mapper's `onError` like an
 * exception of `map`: halt (the `MapperError`'s `cause`) or a `MapperFailed` record whose
 * `cause.output` holds these details. The message names the mapper, the event (index, type,
 * stream), the field path and the fix.
 */
export class MapperOutputError extends EventAssemblerError {
  declare readonly code: 'MAPPER_OUTPUT_INVALID';
  declare readonly details: MapperOutputErrorDetails;

  constructor(details: MapperOutputErrorDetails) {
    super('MAPPER_OUTPUT_INVALID', describeOutputProblem(details), details);
  }
}

function describeOutputProblem(d: MapperOutputErrorDetails): string {
  const who = d.mapper === null ? '' : `mapper "${d.mapper}": `;
  if (d.event === null) return `${who}${d.problem} — fix: ${d.hint}`;
  const at = `events[${d.event.index}]${d.path.startsWith('(') ? '' : `.${d.path}`}`;
  const about = [d.event.type === null ? null : `type ${d.event.type}`, d.event.stream === null || d.path === 'stream' ? null : `stream "${d.event.stream}"`].filter((s) => s !== null);
  return `${who}${at} ${d.problem}${about.length > 0 ? ` (${about.join(', ')})` : ''} — fix: ${d.hint}`;
}

/** Two runs of a mapper over the same input produced different output (see `checkMapperPurity`). */
export class MapperPurityError extends EventAssemblerError {
  declare readonly code: 'MAPPER_IMPURE';
  declare readonly details: {
    readonly mapper: string;
    readonly path: string;
    readonly first: string;
    readonly second: string;
    /** The source transaction both runs mapped, when the assembler found it (`null` in the test kit). */
    readonly position: { readonly commitLsn: string; readonly xid: number } | null;
  };

  constructor(mapper: string, path: string, first: string, second: string, position: { readonly commitLsn: string; readonly xid: number } | null = null) {
    const input = position ? `the transaction at commitLsn ${position.commitLsn} xid ${position.xid}` : 'the same input';
    super(
      'MAPPER_IMPURE',
      `mapper "${mapper}" is not pure: two runs over ${input} differ at ${path} (first run: ${first}, second run: ${second}) — ` +
        'fix: derive events only from the transaction given: no clocks (Date.now, new Date()), randomness (Math.random, randomUUID) or state kept between calls; use tx.commitTime for time',
      { mapper, path, first, second, position },
    );
  }

}

/**
 * A view method was used in a way the mapper's declaration does not allow (e.g. `changed('x')`
 * where `x` is not declared in `before`). Thrown inside `map`, so it surfaces as a MapperError.
 */
export class MapperUsageError extends EventAssemblerError {
  declare readonly code: 'MAPPER_USAGE';

  constructor(message: string, details: Readonly<Record<string, unknown>>) {
    super('MAPPER_USAGE', message, details);
  }
}

export function describeFailure(d: FailureDiagnosis): string {
  const where =
    d.origin === 'change'
      ? `commitLsn ${d.position?.commitLsn ?? '?'} xid ${d.position?.xid ?? '?'} (checkpoint ${d.position?.checkpoint ?? '?'})`
      : `snapshot generation ${d.snapshotGeneration ?? '?'}`;
  const keys = d.keys.map((k) => `${k.table} ${k.op} ${JSON.stringify(k.key)}`).join('; ');
  const omitted = d.keysOmitted > 0 ? ` (+${d.keysOmitted} more)` : '';
  return `mapper "${d.mapper}" failed at ${where} on ${d.tables.join(', ') || '(no tables)'}; keys: ${keys || '(none)'}${omitted}: ${d.cause.name}: ${d.cause.message}`;
}
