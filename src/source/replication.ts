/**
 * The replication stream: PostgreSQL logical replication (pgoutput over the CopyBoth
 * sub-protocol) in, decoded messages out, with standby status updates of the durable position
 * and reconnects with backoff. This file only re-exports; the parts live in `replication/`:
 * - `stream.ts` — runs connection after connection, owns the positions (createReplicationStream);
 * - `connection.ts` — one connection: IDENTIFY_SYSTEM, slot check, START_REPLICATION, CopyData;
 * - `feedback.ts` — standby status updates, keepalive answers, idle acknowledgements;
 * - `reconnect-policy.ts` — retryable, slot active elsewhere, or fatal; the backoff and the poll between attempts;
 * - `slot-holder.ts` — who streams a slot (pid, client address);
 * - `wire.ts` — the protocol's bytes and commands; `types.ts`, `errors.ts`.
 */
export { ReplicationError, SlotActiveError, type SlotHolder } from './replication/errors.js';
export { backoffDelay, classifyFailure, DEFAULT_BACKOFF, DEFAULT_SLOT_POLL_INTERVAL_MS, type BackoffOptions, type FailureKind } from './replication/reconnect-policy.js';
export { describeSlotHolder, querySlotHolder } from './replication/slot-holder.js';
export { createReplicationStream } from './replication/stream.js';
export type { ReplicationSession, ReplicationStream, ReplicationStreamOptions } from './replication/types.js';
export { standbyStatusUpdate } from './replication/wire.js';
