/**
 * Did a snapshot record handed to the sink by the previous process (its position pinned, its
 * durability unknown at the crash) land? Asked once per such record when a resumed snapshot meets
 * its row again (its first change, or a chunk that reads it).
 *
 * Why not just re-send it at its pinned position and let the receipt decide: in a stream of its
 * own that works (nothing later than the record can be there), but a stream shared by several
 * entities may since have received later events of other rows — the record then sorts before the
 * tail and would be taken for a replay although it never landed (dropped). So: the record is
 * mapped again (mappers are pure: same events, same ids, same streams), and each of its streams is
 * read backwards from the tail down to the record's position looking for its event ids. Landed in
 * every stream: nothing to send. In none: it is sent at a new position (after the tails).
 *
 * A destination outage is waited out (the destination's retry policy, as the sink's own calls):
 * the question comes up while a resumed snapshot runs beside the stream, and a KurrentDB restart
 * then must not stop the line (found by the chaos run: `run` exited 1 on an UnavailableError).
 */
import { BACKWARDS, END, KurrentDBClient } from '@kurrent/kurrentdb-client';
import type { ResolvedConfig } from '../config/schema.js';
import { canonicalKey, mapUnit } from '../mapping/index.js';
import { compareUnits, DEFAULT_RETRY, isTransientError, readerConnectionString, receiptFromMetadata, receiptsComparable, type SnapshotUnit } from '../sink/index.js';
import { backoffDelay } from '../sink/retry.js';
import type { SnapshotRecord } from '../source/types.js';
import type { PinnedPosition } from './snapshot-store.js';

export type Landed = 'all' | 'none' | 'some';

/** Whether `id` is in `stream` at or after `unit`'s position (read backwards from the tail). */
async function inStream(client: KurrentDBClient, stream: string, id: string, unit: SnapshotUnit): Promise<boolean> {
  try {
    for await (const resolved of client.readStream(stream, { direction: BACKWARDS, fromRevision: END })) {
      const event = resolved.event;
      if (!event) continue;
      if (event.id === id) return true;
      const receipt = receiptFromMetadata(event.metadata);
      if (receipt && receiptsComparable(receipt, unit) && compareUnits(receipt, unit) < 0) return false;
    }
    return false;
  } catch (error) {
    if ((error as { type?: unknown }).type === 'stream-not-found') return false;
    throw error;
  }
}

/** A reader client, replaced after an outage (a client whose discovery failed stays failed). */
interface Reader {
  client: KurrentDBClient;
  readonly connectionString: string;
}

/** `inStream`, retried while the destination is unavailable (up to `maxAttempts` when the policy has one). */
async function inStreamRetrying(reader: Reader, stream: string, id: string, unit: SnapshotUnit, retry: ResolvedConfig['destination']['retry']): Promise<boolean> {
  const policy = { ...DEFAULT_RETRY, ...retry };
  for (let attempt = 1; ; attempt++) {
    try {
      return await inStream(reader.client, stream, id, unit);
    } catch (error) {
      if (!isTransientError(error) || (policy.maxAttempts !== undefined && attempt >= policy.maxAttempts)) throw error;
      await new Promise((resolve) => setTimeout(resolve, backoffDelay(policy, attempt)));
      await reader.client.dispose().catch(() => undefined);
      reader.client = KurrentDBClient.connectionString(reader.connectionString);
    }
  }
}

/**
 * For each record (with the position it was pinned at): `all` its events are in their streams,
 * `none`, or `some` (per-stream appends, cut by the crash: the caller re-sends it at its pinned
 * position, which the streams holding it recognise).
 */
export async function recordsLanded(
  config: Pick<ResolvedConfig, 'name' | 'mappers' | 'destination'>,
  systemId: string,
  records: readonly SnapshotRecord[],
  positions: readonly PinnedPosition[],
): Promise<Landed[]> {
  if (records.length === 0) return [];
  const connectionString = readerConnectionString(config.destination.connectionString);
  const reader: Reader = { client: KurrentDBClient.connectionString(connectionString), connectionString };
  try {
    const out: Landed[] = [];
    for (let i = 0; i < records.length; i++) {
      const record = records[i]!;
      const position = positions[i]!;
      const unit: SnapshotUnit = {
        kind: 'snapshot', assembler: config.name, source: systemId, lsn: position.lsn, generation: record.snapshotGeneration,
        sequence: position.sequence, table: record.table, key: canonicalKey(record.change.key),
      };
      const { events } = mapUnit(config.mappers, record, { assembler: config.name, sourceIdentity: systemId });
      let found = 0;
      for (const event of events) if (await inStreamRetrying(reader, event.stream, event.id, unit, config.destination.retry)) found += 1;
      out.push(found === events.length ? 'all' : found === 0 ? 'none' : 'some');
    }
    return out;
  } finally {
    await reader.client.dispose().catch(() => undefined);
  }
}
