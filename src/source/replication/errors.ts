/** The replication connection's errors: a fatal problem with the slot, privileges or protocol (never retried), and a slot held by another connection. */
import { EventAssemblerError } from '../../errors.js';

/** A fatal problem with the replication connection (the slot, privileges, protocol). */
export class ReplicationError extends EventAssemblerError {
  constructor(code: string, message: string, details: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super(code, message, details, options);
  }
}

/** Who streams from a slot: the walsender's pid and, where `pg_stat_activity` shows it, its client. */
export interface SlotHolder {
  /** `pg_replication_slots.active_pid`: the walsender process serving the slot. */
  readonly pid: number;
  /** `client_addr:client_port` of that walsender's connection, `local socket`, or `null` when not visible to this role. */
  readonly client: string | null;
  /** The holder's `application_name`, when visible. */
  readonly applicationName: string | null;
  /** The walsender of one of this stream's own earlier sessions (a connection it lost and PostgreSQL has not yet ended). */
  readonly ours: boolean;
}

/**
 * The slot is streamed by another connection (SQLSTATE 55006 object_in_use, "replication slot …
 * is active for PID …"): PostgreSQL lets one connection at a time stream a slot. Not a lost
 * connection and not fatal: the reader polls until the slot is free (a standby).
 */
export class SlotActiveError extends Error {
  /** The SQLSTATE PostgreSQL answers START_REPLICATION with in this case. */
  readonly code = '55006';
  constructor(
    readonly slot: string,
    readonly holder: SlotHolder,
  ) {
    super(`replication slot "${slot}" is active for pid ${holder.pid}${holder.client ? ` on ${holder.client}` : ''}${holder.ours ? " (this process's previous connection, not yet ended by PostgreSQL)" : ''}`);
    this.name = 'SlotActiveError';
  }
}

/** PostgreSQL's message for START_REPLICATION on a busy slot: `replication slot "s" is active for PID 1234`. */
const SLOT_ACTIVE_MESSAGE = /replication slot "?([^"\s]*)"? is active for PID (\d+)/i;

/** The holder's pid when `error` is PostgreSQL's "slot is active" refusal (55006), else `null`. */
export function slotActivePid(error: unknown): number | null {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e.message !== 'string') return null;
  if (e.code !== undefined && e.code !== '55006') return null;
  const match = SLOT_ACTIVE_MESSAGE.exec(e.message);
  return match ? Number(match[2]) : null;
}

export function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
