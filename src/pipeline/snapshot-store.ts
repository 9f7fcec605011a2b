/**
 * Durable snapshot progress of the running pipeline, kept in KurrentDB next to the source
 * checkpoint (stream `event-assembler.snapshot-<name>`), so it travels with the destination.
 *
 * Each save appends one `SnapshotProgress` event; the last one is the current record:
 *
 * - `progress`: the snapshot module's checkpoint format (docs/snapshots.md), validated on load;
 * - `pinned`: sink positions of snapshot records handed to the sink whose progress is not saved
 *   yet (`[table, canonical key, lsn, sequence]`). Written BEFORE those records are appended, so
 *   after a crash a record read again (same generation, same key) gets the position it had —
 *   the sink's receipt then recognises it as a replay instead of appending it a second time.
 */
import { BACKWARDS, END, jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { parseSnapshotProgress, type SnapshotProgress } from '../source/snapshot/index.js';
import type { Lsn } from '../source/types.js';

export const SNAPSHOT_PROGRESS_EVENT_TYPE = 'SnapshotProgress';

export function snapshotProgressStreamName(assembler: string): string {
  return `event-assembler.snapshot-${assembler}`;
}

export interface PinnedPosition {
  readonly lsn: Lsn;
  readonly sequence: number;
}

export interface StoredSnapshotState {
  readonly progress: SnapshotProgress;
  /** Key: `<table>\u0000<canonical key>`. */
  readonly pinned: ReadonlyMap<string, PinnedPosition>;
}

export interface PipelineSnapshotStore {
  load(): Promise<StoredSnapshotState | null>;
  save(progress: SnapshotProgress, pinned: ReadonlyMap<string, PinnedPosition>): Promise<void>;
  close(): Promise<void>;
}

export function createKurrentDBSnapshotStore(connectionString: string, assembler: string): PipelineSnapshotStore {
  const client = KurrentDBClient.connectionString(connectionString);
  const stream = snapshotProgressStreamName(assembler);
  const retry = async <T>(what: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await what();
      } catch (error) {
        if ((error as { type?: unknown }).type === 'stream-not-found' || attempt >= 5) throw error;
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
  };
  return {
    async load() {
      try {
        return await retry(async () => {
          for await (const resolved of client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
            const data = resolved.event?.data as { progress?: unknown; pinned?: unknown } | undefined;
            if (!data) return null;
            const progress = parseSnapshotProgress(data.progress);
            const pinned = new Map<string, PinnedPosition>();
            for (const entry of Array.isArray(data.pinned) ? (data.pinned as unknown[]) : []) {
              if (!Array.isArray(entry) || entry.length !== 4) continue;
              const [table, key, lsn, sequence] = entry as [unknown, unknown, unknown, unknown];
              if (typeof table === 'string' && typeof key === 'string' && typeof lsn === 'string' && typeof sequence === 'number') pinned.set(`${table}\u0000${key}`, { lsn, sequence });
            }
            return { progress, pinned };
          }
          return null;
        });
      } catch (error) {
        if ((error as { type?: unknown }).type === 'stream-not-found') return null;
        throw error;
      }
    },
    async save(progress, pinned) {
      const entries = [...pinned].map(([k, p]) => {
        const i = k.indexOf('\u0000');
        return [k.slice(0, i), k.slice(i + 1), p.lsn, p.sequence];
      });
      // Expected `any`: one assembler owns the stream; a retried save appends the same record again (harmless, the last one counts).
      await retry(() => client.appendToStream(stream, jsonEvent({ type: SNAPSHOT_PROGRESS_EVENT_TYPE, data: { assembler, progress, pinned: entries } as never })));
    },
    async close() {
      await client.dispose().catch(() => undefined);
    },
  };
}
