/**
 * The signals that need no running process — for `event-assembler status`: the slot as
 * PostgreSQL reports it (slot-reading.ts), the last checkpoint this assembler recorded in
 * KurrentDB (`event-assembler.checkpoint-<name>`) and its failed-records stream. Read-only.
 * An unreachable server is a {@link StatusUnreachableError} naming it.
 */
import { BACKWARDS, END, KurrentDBClient } from '@kurrent/kurrentdb-client';
import type pg from 'pg';
import { connectSource } from '../source/connect-source.js';
import { readFailoverState, type SlotFailoverState } from '../source/failover-state.js';
import { EventAssemblerError } from '../errors.js';
import { failedRecordsStream } from '../mapping/index.js';
import { postgresAddress } from '../pipeline/startup.js';
import { checkpointStreamName, kurrentdbAddress, readerConnectionString } from '../sink/index.js';
import { lsnDistance } from '../source/position.js';
import type { Lsn } from '../source/types.js';
import { readSlot, type SlotReading } from './slot-reading.js';

/** Each server gets this long to answer. */
const TIMEOUT_MS = 10_000;

export class StatusUnreachableError extends EventAssemblerError {
  constructor(server: 'PostgreSQL' | 'KurrentDB', address: string, reason: string) {
    super(server === 'PostgreSQL' ? 'SOURCE_UNAVAILABLE' : 'DESTINATION_UNAVAILABLE', `${server} at ${address} could not be read: ${reason}`, { server, address, reason });
  }
}

export interface OfflineStatus {
  readonly version: 1;
  readonly name: string;
  /** When it was read (ISO). */
  readonly at: string;
  readonly slot: SlotReading;
  /** `host:port` of the primary the status was read from (with several hosts: the one the host walk took). */
  readonly server: string;
  /** Whether the slot survives a failover of the primary (`null`: could not be read). */
  readonly failover: SlotFailoverState | null;
  readonly checkpoint: {
    /** Stream name of the checkpoint records. */
    readonly stream: string;
    /** Last recorded position (`null`: none yet). */
    readonly endLsn: Lsn | null;
    /** The source's timeline at that position (`null`: none recorded, or a record older than timelines in checkpoints). */
    readonly timeline: number | null;
    readonly recordedAt: string | null;
    readonly ageSeconds: number | null;
    /** Whether the last record was an idle one (keepalive position, nothing in flight). */
    readonly idle: boolean | null;
    /** slot's confirmed_flush_lsn − recorded position, in bytes: > 0 means the slot is ahead of the record (REBUILD_NEEDED at start). */
    readonly slotAheadBytes: number | null;
  };
  readonly failed: { readonly stream: string; readonly records: number; readonly lastAt: string | null };
}

function reasonOf(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown; errors?: unknown };
  if (typeof e?.message === 'string' && e.message !== '') return e.message;
  if (Array.isArray(e?.errors)) return e.errors.map(reasonOf).join('; ');
  return typeof e?.code === 'string' ? e.code : String(error);
}

async function readSlotOnce(connection: string, slot: string): Promise<{ slot: SlotReading; failover: SlotFailoverState | null; server: string }> {
  let client: pg.Client | null = null;
  try {
    const c = await connectSource(connection, { extra: { connectionTimeoutMillis: TIMEOUT_MS, query_timeout: TIMEOUT_MS, application_name: 'event-assembler status' } });
    client = c;
    const reading = await readSlot(c, slot);
    const server = `${c.host}:${c.port}`;
    // A few catalog reads more (and one connection per other host): whether a failover keeps the slot.
    const failover = await readFailoverState(c, slot, connection, server).catch(() => null);
    return { slot: reading, failover, server };
  } catch (error) {
    throw new StatusUnreachableError('PostgreSQL', postgresAddress(connection), reasonOf(error));
  } finally {
    await client?.end().catch(() => undefined);
  }
}

interface LastEvent {
  readonly revision: bigint;
  readonly created: Date | null;
  readonly data: unknown;
}

async function lastEvent(client: KurrentDBClient, stream: string): Promise<LastEvent | null> {
  try {
    for await (const resolved of client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1, deadline: TIMEOUT_MS })) {
      const event = resolved.event;
      if (event) return { revision: event.revision, created: event.created instanceof Date ? event.created : null, data: event.data };
    }
    return null;
  } catch (error) {
    if ((error as { type?: unknown }).type === 'stream-not-found') return null;
    throw error;
  }
}

export async function readOfflineStatus(input: { readonly name: string; readonly slot: string; readonly connection: string; readonly connectionString: string }): Promise<OfflineStatus> {
  const { slot, failover, server } = await readSlotOnce(input.connection, input.slot);
  const kurrent = KurrentDBClient.connectionString(readerConnectionString(input.connectionString));
  let checkpoint: LastEvent | null;
  let failed: LastEvent | null;
  try {
    [checkpoint, failed] = await Promise.all([lastEvent(kurrent, checkpointStreamName(input.name)), lastEvent(kurrent, failedRecordsStream(input.name))]);
  } catch (error) {
    throw new StatusUnreachableError('KurrentDB', kurrentdbAddress(input.connectionString), reasonOf(error));
  } finally {
    await kurrent.dispose().catch(() => undefined);
  }
  const now = Date.now();
  const position = (checkpoint?.data as { position?: { endLsn?: unknown; idle?: unknown; timeline?: unknown } } | undefined)?.position;
  const endLsn = typeof position?.endLsn === 'string' ? position.endLsn : null;
  return {
    version: 1,
    name: input.name,
    at: new Date(now).toISOString(),
    slot,
    server,
    failover,
    checkpoint: {
      stream: checkpointStreamName(input.name),
      endLsn,
      timeline: typeof position?.timeline === 'number' ? position.timeline : null,
      recordedAt: checkpoint?.created?.toISOString() ?? null,
      ageSeconds: checkpoint?.created ? Math.max(0, (now - checkpoint.created.getTime()) / 1000) : null,
      idle: checkpoint ? position?.idle === true : null,
      slotAheadBytes: endLsn && slot.confirmedFlushLsn ? lsnDistance(endLsn, slot.confirmedFlushLsn) : null,
    },
    failed: { stream: failedRecordsStream(input.name), records: failed ? Number(failed.revision) + 1 : 0, lastAt: failed?.created?.toISOString() ?? null },
  };
}
