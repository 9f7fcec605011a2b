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
// Files: server.ts (lifecycle, fault injection), context.ts (the ordered write path),
// store.ts (log, stream index, deletes, metadata, reads), check-commit.ts (the append rules),
// recent-events.ts (the weak-idempotency cache), streams-service.ts / streams-read.ts /
// streams-v2-service.ts / server-features-service.ts (one per gRPC service), errors.ts (errors as
// the server raises them), proto.ts (the client's generated protocol modules).
export { startInMemoryKurrentDB } from './server.js';
export type { InMemoryKurrentDB, InMemoryKurrentDBOptions, StoredEvent } from './server.js';
export type { InjectedFailureKind, InjectedFailureOptions } from './context.js';
