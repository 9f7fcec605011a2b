/** The replication connection's error: a fatal problem with the slot, privileges or protocol (never retried). */
import { EventAssemblerError } from '../../errors.js';

/** A fatal problem with the replication connection (the slot, privileges, protocol). */
export class ReplicationError extends EventAssemblerError {
  constructor(code: string, message: string, details: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super(code, message, details, options);
  }
}

export function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
