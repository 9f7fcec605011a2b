// An in-memory KurrentDB for tests and demos. It speaks KurrentDB's gRPC protocol on loopback, so
// the real `@kurrent/kurrentdb-client` (including reads through its native `@kurrent/bridge`)
// works against it unchanged:
//
//   const db = await startInMemoryKurrentDB();
//   const client = KurrentDBClient.connectionString(db.connectionString);
//   ...
//   await client.dispose();
//   await db.close();
//
// Served: Streams.Read (stream and $all reads, catch-up subscriptions with filters and
// checkpoints), Streams.Append, Streams.BatchAppend, Streams.Delete, Streams.Tombstone,
// ServerFeatures.GetSupportedMethods and the v2 StreamsService.AppendSession (multiStreamAppend).
// Not served: persistent subscriptions, projections, users, operations, gossip, link resolution.
//
// Files: server.ts (lifecycle, fault injection), context.ts (the ordered write path);
// the store: store.ts (wiring), stream-log.ts (log and stream index), store-append.ts (atomic
// appends), store-deletes.ts (soft delete, tombstone, undelete), read-stream.ts (what a stream read
// sees), stream-metadata.ts, store-types.ts, check-commit.ts (the append rules), recent-events.ts
// (the weak-idempotency cache); the services: streams-service.ts (v1 Streams, wiring) with
// streams-read.ts / streams-subscribe.ts / streams-append.ts / streams-batch-append.ts /
// streams-delete.ts (one per RPC), streams-messages.ts / read-messages.ts / event-filter.ts (v1
// messages in and out), read-codec.ts (Read's hot messages by hand), streams-v2-service.ts with
// v2-append-decoder.ts / v2-append-response.ts, server-features-service.ts; the calls served off
// the HTTP/2 stream instead of grpc-js: AppendSession (streams-v2-service.ts), plain stream reads
// and subscriptions (streams-read-h2.ts, h2-subscription-call.ts), their answers (h2-answer.ts);
// errors.ts (errors as the server raises them), proto.ts (the client's generated protocol modules).
export { startInMemoryKurrentDB } from './server.js';
export type { InMemoryKurrentDB, InMemoryKurrentDBOptions, StoredEvent } from './server.js';
export type { InjectedFailureKind, InjectedFailureOptions } from './context.js';
