/**
 * Stage `source/`: PostgreSQL logical replication in, complete committed transactions out
 * (`createPostgresSource`, see postgres-source.ts). This file only re-exports:
 * - `postgres-source.ts` — the stage's interface and its wiring;
 * - `source-options.ts` — the options, their defaults and their validation;
 * - `transaction-intake.ts` — messages into the buffer, transactions queued, in flight, deduplicated;
 * - `message-order.ts` — messages kept in stream order while the buffer waits for the disk;
 * - `backpressure.ts` — when reading pauses and resumes;
 * - `replication.ts` (and `replication/`) — the replication connection, feedback and reconnects.
 */
export type { CommittedTransaction, NonTransactionalMessage } from '../buffer/index.js';
export { createPostgresSource, isSourceIdle, type PostgresSource, type SourceState, type SourceStatus } from './postgres-source.js';
export { classifyFailure, describeSlotHolder, querySlotHolder, SlotActiveError, type FailureKind, type SlotHolder } from './replication.js';
export { HEARTBEAT_PREFIX, HEARTBEAT_SQL, heartbeatParams, isHeartbeatOnly, type HeartbeatContent } from './heartbeat.js';
export { parsePostgresSourceOptions, SourceConfigError, type PostgresSourceOptions, type PostgresSourceTable } from './source-options.js';
