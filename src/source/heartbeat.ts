/**
 * Heartbeats: tiny transactional logical messages the assembler writes into the WAL so that
 * freshness can be measured end to end (DESIGN invariant 11). PostgreSQL decodes them through
 * the slot like any transaction — a BEGIN, one Message, a COMMIT — so when one is durable
 * downstream, every commit before it is too, and on an idle database the heartbeat itself is the
 * newest source commit. They are never mapped to events; their position is acknowledged like
 * that of a transaction that touched no captured table.
 *
 * `pg_logical_emit_message` is executable by PUBLIC in PostgreSQL 17 (no grant needed); it
 * writes WAL, so it needs a primary (not a hot standby).
 */
import type { Change } from './types.js';

/** Prefix of heartbeat messages in the WAL. */
export const HEARTBEAT_PREFIX = 'event-assembler.heartbeat';

/** What a heartbeat message carries (JSON): who wrote it and when, on the writer's clock. */
export interface HeartbeatContent {
  readonly version: 1;
  readonly assembler: string;
  /** ISO-8601 time the assembler wrote it. */
  readonly emittedAt: string;
}

/** The SQL that writes one heartbeat (transactional: it arrives in a transaction of its own). */
export const HEARTBEAT_SQL = 'SELECT pg_catalog.pg_logical_emit_message(true, $1, $2)::text AS lsn';

export function heartbeatParams(assembler: string, now: Date = new Date()): [string, string] {
  const content: HeartbeatContent = { version: 1, assembler, emittedAt: now.toISOString() };
  return [HEARTBEAT_PREFIX, JSON.stringify(content)];
}

/**
 * Whether a transaction holds heartbeat messages and nothing else (any assembler's: a database
 * may feed several). `changes` counts every change, messages included.
 */
export function isHeartbeatOnly(changes: Iterable<Change>): boolean {
  let any = false;
  for (const change of changes) {
    if (change.op !== 'message' || change.prefix !== HEARTBEAT_PREFIX) return false;
    any = true;
  }
  return any;
}
