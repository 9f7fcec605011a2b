// The consumer kit's errors: one code per failure kind, with the context to act on it.
import { EventAssemblerError } from '../errors.js';
import type { AllPosition } from './types.js';

export type ProjectionErrorCode =
  | 'PROJECTION_INVALID_DEFINITION'
  | 'PROJECTION_INVALID_OPTIONS'
  | 'PROJECTION_CONFLICT'
  | 'PROJECTION_HANDLER_FAILED'
  | 'PROJECTION_GENERATION_STATE'
  | 'PROJECTION_VALIDATION_FAILED';

/** Base of the consumer kit's errors. */
export class ProjectionError extends EventAssemblerError {
  declare readonly code: ProjectionErrorCode;
}

/** A projection definition or runner option is wrong; the message names the field. */
export class ProjectionConfigError extends ProjectionError {
  declare readonly details: { readonly projection: string; readonly field: string };

  constructor(code: 'PROJECTION_INVALID_DEFINITION' | 'PROJECTION_INVALID_OPTIONS', projection: string, field: string, problem: string) {
    super(code, `projection "${projection}": ${field} ${problem}`, { projection, field });
  }
}

function describePosition(position: AllPosition | null): string {
  return position === null ? 'the start' : `${position.commit}/${position.prepare}`;
}

/**
 * Another instance advanced this projection partition's checkpoint: the compare-and-set on the
 * previous position failed, this instance's transaction rolled back (nothing of it applied) and
 * it stops. Run one instance per partition.
 */
export class ProjectionConflictError extends ProjectionError {
  declare readonly details: { readonly projection: string; readonly partition: string; readonly expected: AllPosition | null; readonly found: AllPosition | null };

  constructor(projection: string, partition: string, expected: AllPosition | null, found: AllPosition | null) {
    super(
      'PROJECTION_CONFLICT',
      `projection "${projection}" partition ${partition}: the checkpoint moved from ${describePosition(expected)} to ${describePosition(found)} under this instance — ` +
        'another instance runs the same partition; this one rolled back its batch and stops',
      { projection, partition, expected, found },
    );
  }
}

/**
 * Another instance is active on this projection partition (it holds the partition's lease,
 * lease.ts): this one stops before doing anything. Run it with `standby: true` to wait instead.
 */
export class ProjectionLeaseHeldError extends ProjectionError {
  declare readonly details: {
    readonly projection: string;
    readonly partition: string;
    readonly holder: { readonly pid: number; readonly applicationName: string | null; readonly clientAddress: string | null; readonly since: string | null } | null;
  };

  constructor(projection: string, partition: string, holder: ProjectionLeaseHeldError['details']['holder']) {
    const who = holder === null ? 'another session' : `PostgreSQL backend ${holder.pid}${holder.clientAddress ? ` (client ${holder.clientAddress})` : ''}${holder.since ? `, connected since ${holder.since}` : ''}`;
    super(
      'PROJECTION_CONFLICT',
      `projection "${projection}" partition ${partition}: another instance is active (${who} holds the partition's lease) — ` + 'this one stops; run it as a standby (standby: true, `project --standby`) to take over when the other stops',
      { projection, partition, holder },
    );
  }
}

/** What is known of an event whose handler failed. */
export interface HandlerFailureDetails {
  readonly projection: string;
  readonly eventId: string;
  readonly type: string;
  readonly stream: string;
  readonly revision: bigint;
  readonly position: AllPosition;
  readonly attempts: number;
  readonly cause: { readonly name: string; readonly message: string };
}

/** A handler kept failing on one event and the projection's `onError` is `halt`: the runner stopped before it (its checkpoint is just before the event). */
export class ProjectionHandlerError extends ProjectionError {
  declare readonly details: HandlerFailureDetails;

  constructor(details: HandlerFailureDetails, cause: unknown) {
    super(
      'PROJECTION_HANDLER_FAILED',
      `projection "${details.projection}": handler for ${details.type} ${details.eventId} (stream ${details.stream}@${details.revision}, $all ${describePosition(details.position)}) ` +
        `failed ${details.attempts} time(s): ${details.cause.message} — the runner halted before the event; fix the handler (or set onError: 'park') and restart`,
      details,
      { cause },
    );
  }
}

/** A generation is not in the state the operation needs (none to roll back to, a rebuild already running, a generation that does not exist). */
export class ProjectionGenerationError extends ProjectionError {
  declare readonly details: { readonly projection: string; readonly generation: number | null };

  constructor(projection: string, generation: number | null, problem: string) {
    super('PROJECTION_GENERATION_STATE', `projection "${projection}"${generation === null ? '' : ` generation ${generation}`}: ${problem}`, { projection, generation });
  }
}

/** What a failed validation found. */
export interface ValidationFailureDetails {
  readonly projection: string;
  readonly generation: number;
  /** The generation that keeps serving (`null`: none yet). */
  readonly serving: number | null;
  /** `count`: rows against live entities; `sample`: a sampled row against its source row; `parked`: events the load parked. */
  readonly check: 'count' | 'sample' | 'parked';
  readonly entity: { readonly type: string; readonly id: string } | null;
  readonly row: Record<string, unknown> | null;
  readonly source: Record<string, unknown> | null;
  /** What differed. */
  readonly difference: string;
}

/** A rebuilt generation failed validation: it was not switched in (readers stay on the serving generation) and is marked failed. */
export class ProjectionValidationError extends ProjectionError {
  declare readonly details: ValidationFailureDetails;

  constructor(details: ValidationFailureDetails) {
    const what = details.entity ? `${details.check} check, entity ${details.entity.type}/${details.entity.id}` : `${details.check} check`;
    const keeps = details.serving === null ? 'no generation serves yet' : `generation ${details.serving} keeps serving`;
    super('PROJECTION_VALIDATION_FAILED', `projection "${details.projection}" generation ${details.generation} failed validation (${what}): ${details.difference} — not switched in; ${keeps}`, details);
  }
}
