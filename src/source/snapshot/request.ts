/**
 * Ad hoc snapshot requests travel through the WAL: `event-assembler snapshot --config …` writes a
 * transactional logical decoding message
 *
 * ```sql
 * SELECT pg_logical_emit_message(true, 'event-assembler.snapshot-request', '{"version":1,"id":…,"assembler":…,"tables":[…],…}')
 * ```
 *
 * and the running assembler sees it in its stream, in commit order with the changes, like the
 * watermarks. Why the WAL and not a table or a signal: a transactional message is delivered only
 * if it committed, it is durable the moment the CLI returns, it needs no grant in PostgreSQL 17
 * (`pg_logical_emit_message` is executable by PUBLIC) and no table in the publication (messages are
 * not filtered by publication), and a request made while the assembler is down waits in the slot
 * until the assembler reads it. `assembler` names the assembler the request is for (several may
 * read the same database); `id` makes a request re-sent after a restart recognisable.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import type { Lsn, QualifiedTable } from '../types.js';

/** Prefix of snapshot request messages in the WAL. */
export const SNAPSHOT_REQUEST_PREFIX = 'event-assembler.snapshot-request';

export interface SnapshotRequest {
  readonly version: 1;
  /** Unique per request (a UUID): a request re-sent by the slot after a restart is recognised. */
  readonly id: string;
  /** The assembler (config `name`) that should run it. */
  readonly assembler: string;
  readonly tables: readonly QualifiedTable[];
  readonly requestedAt: string;
  /** Free text for the log (user and host of the CLI). */
  readonly requestedBy: string | null;
}

const requestSchema = z.object({
  version: z.literal(1),
  id: z.string().min(1).max(100),
  assembler: z.string().min(1),
  tables: z.array(z.string().min(1)).min(1),
  requestedAt: z.string(),
  requestedBy: z.string().nullable(),
});

export function newSnapshotRequest(init: { assembler: string; tables: readonly QualifiedTable[]; requestedBy?: string | null; now?: Date }): SnapshotRequest {
  return {
    version: 1, id: randomUUID(), assembler: init.assembler, tables: [...new Set(init.tables)],
    requestedAt: (init.now ?? new Date()).toISOString(), requestedBy: init.requestedBy ?? null,
  };
}

export function encodeSnapshotRequest(request: SnapshotRequest): string {
  return JSON.stringify(request);
}

/** Parses a request message's content; `null` when it is not a valid request. */
export function decodeSnapshotRequest(content: Buffer | string): SnapshotRequest | null {
  try {
    const r = requestSchema.safeParse(JSON.parse(typeof content === 'string' ? content : content.toString('utf8')));
    return r.success ? (r.data as SnapshotRequest) : null;
  } catch {
    return null;
  }
}

/** Writes the request into the WAL (its own transaction when `client` is in autocommit); returns the message's LSN. */
export async function emitSnapshotRequest(client: pg.ClientBase, request: SnapshotRequest): Promise<Lsn> {
  const r = await client.query<{ lsn: string }>('SELECT pg_logical_emit_message(true, $1, $2)::text AS lsn', [SNAPSHOT_REQUEST_PREFIX, encodeSnapshotRequest(request)]);
  return r.rows[0]!.lsn;
}
