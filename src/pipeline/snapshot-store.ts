/**
 * Durable snapshot progress of the running pipeline, kept in KurrentDB next to the source
 * checkpoint (stream `event-assembler.snapshot-<name>`), so it travels with the destination.
 *
 * Each save appends one `SnapshotProgress` event; the last one is the current record:
 *
 * - `progress`: the snapshot module's checkpoint format (docs/snapshots.md), validated on load;
 * - `pinned`: sink positions of snapshot records handed to the sink whose progress is not saved
 *   yet. Written BEFORE those records are appended, so after a crash a record read again (same
 *   generation, same key) gets the position it had — the sink's receipt then recognises it as a
 *   replay instead of appending it a second time. Saved as `pinnedRuns`, `[table, lsn,
 *   firstSequence, [canonical key, …]]` — one entry per run of consecutive sequences of one
 *   table at one LSN (a chunk's records: its keys, nothing repeated). Records before runs held
 *   `pinned`, `[table, canonical key, lsn, sequence]` per record: still read;
 * - `requests`: ad hoc snapshot requests (`event-assembler snapshot`) read from the WAL —
 *   `queued` ones wait for the running snapshot to finish, `handled` lists the ids of the last
 *   requests taken (started, queued or refused), so one the slot re-sends after a restart is not
 *   taken twice. Saved BEFORE the request's transaction may be acknowledged, so a request is
 *   never lost: either the slot re-sends it or this record has it;
 * - `marks` (a resumed initial snapshot only): keys marked read since the previous save — rows
 *   whose before-image record was emitted, rows inserted after the consistent point. Saved BEFORE
 *   the transaction that made them may be acknowledged; a load gathers the marks of every save of
 *   the generation (snapshot-first-change.ts, docs/snapshots.md);
 * - `sequence`: the last snapshot sequence handed out, so positions never repeat across restarts.
 */
import { BACKWARDS, END, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { decodeSnapshotRequest, isSnapshotFinished, parseSnapshotProgress, type SnapshotProgress, type SnapshotRequest } from '../source/snapshot/index.js';
import type { Lsn } from '../source/types.js';
import { DEFAULT_RETRY, isTransientError, readerConnectionString, type RetryPolicy } from '../sink/index.js';
import { createJsonAppender } from '../sink/json-append.js';
import { backoffDelay } from '../sink/retry.js';

export const SNAPSHOT_PROGRESS_EVENT_TYPE = 'SnapshotProgress';

export function snapshotProgressStreamName(assembler: string): string {
  return `event-assembler.snapshot-${assembler}`;
}

export interface PinnedPosition {
  readonly lsn: Lsn;
  readonly sequence: number;
}

/** A request waiting for the running snapshot, with the LSN of its message. */
export type QueuedSnapshotRequest = SnapshotRequest & { readonly lsn: Lsn };

export interface SnapshotRequestState {
  readonly queued: readonly QueuedSnapshotRequest[];
  /** Ids of the last requests taken (newest last, at most {@link HANDLED_REQUESTS_KEPT}). */
  readonly handled: readonly string[];
}

export const HANDLED_REQUESTS_KEPT = 1000;

/** A key a resumed initial snapshot marked read (`[table, keyString]`, see snapshot-first-change.ts). */
export type ReadMark = readonly [table: string, key: string];

/** What a save adds besides the current record: marks made since the last save, the last sequence used. */
export interface SnapshotSaveExtras {
  readonly marks?: readonly ReadMark[];
  readonly sequence?: number;
}

export interface StoredSnapshotState {
  readonly progress: SnapshotProgress;
  /** Key: `<table>\u0000<canonical key>`. */
  readonly pinned: ReadonlyMap<string, PinnedPosition>;
  readonly requests: SnapshotRequestState;
  /** Every mark saved for this generation (the deltas of all its saves). */
  readonly marks: readonly ReadMark[];
  /** The highest snapshot sequence saved (0: none), so positions stay unique across restarts. */
  readonly sequence: number;
}

export interface PipelineSnapshotStore {
  load(): Promise<StoredSnapshotState | null>;
  save(progress: SnapshotProgress, pinned: ReadonlyMap<string, PinnedPosition>, requests?: SnapshotRequestState, extras?: SnapshotSaveExtras): Promise<void>;
  close(): Promise<void>;
}

function parseMarks(value: unknown, out: ReadMark[]): void {
  if (!Array.isArray(value)) return;
  for (const entry of value as unknown[]) {
    if (Array.isArray(entry) && entry.length === 2 && typeof entry[0] === 'string' && typeof entry[1] === 'string') out.push([entry[0], entry[1]]);
  }
}

type StoredEvent = { progress?: { generation?: unknown; startedAt?: unknown }; pinned?: unknown; pinnedRuns?: unknown; marks?: unknown; sequence?: unknown };

/** A run of pins: one table, one LSN, consecutive sequences from `firstSequence`, the keys in sequence order. */
type PinRun = [table: string, lsn: string, firstSequence: number, keys: string[]];

/** The pins as runs (see the header): a chunk of 1,000 records is one run, its keys the only per-record text. */
export function pinRuns(pinned: ReadonlyMap<string, PinnedPosition>): PinRun[] {
  const runs: PinRun[] = [];
  let run: PinRun | null = null;
  for (const [k, p] of pinned) {
    const i = k.indexOf('\u0000');
    const table = k.slice(0, i);
    if (run && run[0] === table && run[1] === p.lsn && run[2] + run[3].length === p.sequence) run[3].push(k.slice(i + 1));
    else runs.push((run = [table, p.lsn, p.sequence, [k.slice(i + 1)]]));
  }
  return runs;
}

/** The pins of a stored record: `pinnedRuns`, and `pinned` of records written before runs. */
export function parsePins(data: StoredEvent): Map<string, PinnedPosition> {
  const pinned = new Map<string, PinnedPosition>();
  for (const entry of Array.isArray(data.pinned) ? (data.pinned as unknown[]) : []) {
    if (!Array.isArray(entry) || entry.length !== 4) continue;
    const [table, key, lsn, sequence] = entry as [unknown, unknown, unknown, unknown];
    if (typeof table === 'string' && typeof key === 'string' && typeof lsn === 'string' && typeof sequence === 'number') pinned.set(`${table}\u0000${key}`, { lsn, sequence });
  }
  for (const entry of Array.isArray(data.pinnedRuns) ? (data.pinnedRuns as unknown[]) : []) {
    if (!Array.isArray(entry) || entry.length !== 4) continue;
    const [table, lsn, first, keys] = entry as [unknown, unknown, unknown, unknown];
    if (typeof table !== 'string' || typeof lsn !== 'string' || typeof first !== 'number' || !Array.isArray(keys)) continue;
    (keys as unknown[]).forEach((key, i) => {
      if (typeof key === 'string') pinned.set(`${table}\u0000${key}`, { lsn, sequence: first + i });
    });
  }
  return pinned;
}

/**
 * The marks of the generation the last record belongs to: each save carries only the marks made
 * since the one before, so the stream is read backwards until a record of another generation (or
 * of an earlier start of it: `startedAt` differs).
 */
async function generationMarks(events: AsyncIterator<{ event?: { data?: unknown } }>, last: StoredEvent, marks: ReadMark[]): Promise<void> {
  for (;;) {
    const next = await events.next();
    if (next.done) return;
    const data = next.value.event?.data as StoredEvent | undefined;
    if (!data || data.progress?.generation !== last.progress?.generation || data.progress?.startedAt !== last.progress?.startedAt) return;
    parseMarks(data.marks, marks);
  }
}

function parseRequests(value: unknown): SnapshotRequestState {
  const v = (value ?? {}) as { queued?: unknown; handled?: unknown };
  const queued: QueuedSnapshotRequest[] = [];
  for (const entry of Array.isArray(v.queued) ? (v.queued as unknown[]) : []) {
    const lsn = (entry as { lsn?: unknown })?.lsn;
    const request = decodeSnapshotRequest(JSON.stringify(entry));
    if (request && typeof lsn === 'string') queued.push({ ...request, lsn });
  }
  const handled = Array.isArray(v.handled) ? (v.handled as unknown[]).filter((x): x is string => typeof x === 'string') : [];
  return { queued, handled };
}

/**
 * The latest saved progress of the generation started by request `requestId`, searching the
 * progress stream backwards over at most `maxEvents` saves (`null`: not found). For followers
 * (`event-assembler snapshot --wait`) that may look only after a later generation has started.
 */
export async function findRequestedProgress(connectionString: string, assembler: string, requestId: string, maxEvents = 100_000): Promise<SnapshotProgress | null> {
  const client = KurrentDBClient.connectionString(readerConnectionString(connectionString));
  try {
    for await (const resolved of client.readStream(snapshotProgressStreamName(assembler), { direction: BACKWARDS, fromRevision: END, maxCount: maxEvents })) {
      const data = resolved.event?.data as { progress?: { request?: { id?: unknown } | null } } | undefined;
      if (data?.progress?.request?.id === requestId) return parseSnapshotProgress(data.progress);
    }
    return null;
  } catch (error) {
    if ((error as { type?: unknown }).type === 'stream-not-found') return null;
    throw error;
  } finally {
    await client.dispose().catch(() => undefined);
  }
}

/**
 * The progress store in KurrentDB. A destination outage is waited out (`retryPolicy`: the
 * pipeline passes the destination's, as the sink's own calls; `maxAttempts` bounds it when set;
 * without one, as for a CLI command, 5 attempts), with a new client after each transient failure —
 * a client whose discovery failed stays failed. Other errors get 5 attempts.
 * (Five attempts of 0.2–1 s on one client were all it had: a KurrentDB outage of a few seconds
 * during a load or save made `run` exit 1 — found by the chaos run at scale 10.)
 * `close()` ends a wait at once: the retry in progress fails, so a stop is not held up by it.
 */
export function createKurrentDBSnapshotStore(connectionString: string, assembler: string, retryPolicy?: Partial<RetryPolicy>): PipelineSnapshotStore {
  const url = readerConnectionString(connectionString);
  let client = KurrentDBClient.connectionString(url);
  let appender = createJsonAppender(client, url);
  const stream = snapshotProgressStreamName(assembler);
  const policy: RetryPolicy = retryPolicy ? { ...DEFAULT_RETRY, ...retryPolicy } : { ...DEFAULT_RETRY, maxAttempts: 5 };
  let closed = false;
  const pauses = new Set<() => void>();
  /** A pause between attempts that `close()` ends at once. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        pauses.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      pauses.add(done);
    });
  const retry = async <T>(what: () => Promise<T>): Promise<T> => {
    for (let attempt = 1, transient = 0; ; attempt++) {
      try {
        return await what();
      } catch (error) {
        if ((error as { type?: unknown }).type === 'stream-not-found' || closed) throw error;
        if (isTransientError(error)) {
          transient += 1;
          if (policy.maxAttempts !== undefined && transient >= policy.maxAttempts) throw error;
          await pause(backoffDelay(policy, transient));
          if (closed) throw error;
          appender.close();
          await client.dispose().catch(() => undefined);
          client = KurrentDBClient.connectionString(url);
          appender = createJsonAppender(client, url);
          continue;
        }
        if (attempt >= 5) throw error;
        await pause(200 * attempt);
        if (closed) throw error;
      }
    }
  };
  return {
    async load() {
      try {
        return await retry(async () => {
          const events = client.readStream(stream, { direction: BACKWARDS, fromRevision: END })[Symbol.asyncIterator]();
          try {
            const first = await events.next();
            if (first.done) return null;
            const data = first.value.event?.data as StoredEvent | undefined;
            if (!data) return null;
            const progress = parseSnapshotProgress(data.progress);
            const pinned = parsePins(data);
            const marks: ReadMark[] = [];
            parseMarks(data.marks, marks);
            // Marks matter only while an initial snapshot is unfinished (a finished one reads nothing more).
            if (progress.kind === 'initial' && !isSnapshotFinished(progress)) await generationMarks(events, data, marks);
            const sequence = typeof data.sequence === 'number' ? data.sequence : 0;
            return { progress, pinned, requests: parseRequests((data as { requests?: unknown }).requests), marks, sequence };
          } finally {
            await events.return?.();
          }
        });
      } catch (error) {
        if ((error as { type?: unknown }).type === 'stream-not-found') return null;
        throw error;
      }
    },
    async save(progress, pinned, requests = { queued: [], handled: [] }, extras = {}) {
      const runs = pinRuns(pinned);
      // Expected `any`: one assembler owns the stream; a retried save appends the same record again (harmless, the last one counts).
      // A JSON event as appendToStream(stream, jsonEvent(…)) writes one, on the sink's framed path when the server has it (sink/json-append.ts).
      await retry(() => appender.append(stream, SNAPSHOT_PROGRESS_EVENT_TYPE, {
        assembler, progress, pinned: [], pinnedRuns: runs, requests: { queued: requests.queued, handled: requests.handled.slice(-HANDLED_REQUESTS_KEPT) },
        ...(extras.marks && extras.marks.length > 0 ? { marks: extras.marks } : {}),
        ...(extras.sequence ? { sequence: extras.sequence } : {}),
      }));
    },
    async close() {
      closed = true;
      for (const wake of [...pauses]) wake();
      appender.close();
      await client.dispose().catch(() => undefined);
    },
  };
}
