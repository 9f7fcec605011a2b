import { EventAssemblerError } from '../errors.js';
import type { AnyReconciler } from './define-reconciler.js';

export type ReconcileErrorCode =
  /** The assembler's checkpoint did not pass the cut within the wait. */
  | 'RECONCILE_CUT_NOT_REACHED'
  /** A reconciler does not fit the source (table, key, columns) or the mappers (allowlist). */
  | 'RECONCILE_RECONCILER_INVALID'
  /** `only` names no reconciler. */
  | 'RECONCILE_UNKNOWN_RECONCILER'
  /** A reconciler's function threw (stream, expected, fold, deleted). */
  | 'RECONCILE_FUNCTION_FAILED';

/** Reconciliation could not be carried out (differences are not errors: they are the report). */
export class ReconcileError extends EventAssemblerError {
  declare readonly code: ReconcileErrorCode;
  constructor(code: ReconcileErrorCode, message: string, details: object = {}, options?: { cause?: unknown }) {
    super(code, message, details, options);
  }
}

/** Runs one of a reconciler's functions; what it throws becomes RECONCILE_FUNCTION_FAILED naming the reconciler, the function and the stream. */
export function callReconciler<T>(reconciler: AnyReconciler, what: string, stream: string, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    throw new ReconcileError('RECONCILE_FUNCTION_FAILED', `reconciler ${reconciler.name}: ${what} threw for ${stream}: ${(error as Error).message}`, { reconciler: reconciler.name, stream, function: what }, { cause: error });
  }
}
