/**
 * Snapshots while streaming: an incremental (watermark) snapshot — the rest of an interrupted
 * one, or an ad hoc one — and the ad hoc requests (`event-assembler snapshot`) that arrive as
 * logical messages in the WAL: refused (tables not captured, missing, keyless), queued behind the
 * running snapshot, or started as a new generation. Each request is durable in the snapshot
 * store before its transaction can be acknowledged, so none is lost and none is taken twice.
 */
import type { CommittedTransaction } from '../buffer/index.js';
import { incrementalChunkRows } from '../config/schema.js';
import {
  adHocSnapshotProgress, createIncrementalSnapshot, decodeSnapshotRequest, describeTable, isSnapshotFinished, requireKey, SNAPSHOT_REQUEST_PREFIX,
  type SnapshotProgress, type SnapshotRequest,
} from '../source/snapshot/index.js';
import type { Change, Lsn, MessageChange } from '../source/types.js';
import { closeFirstChanges } from './snapshot-first-change.js';
import { saveSnapshotProgress, type SnapshotDeps } from './snapshot-state.js';
import { HANDLED_REQUESTS_KEPT } from './snapshot-store.js';
import { withClient } from './source-queries.js';

/** Runs `progress` as an incremental snapshot while streaming; when it is done, the next queued request starts. */
export function startIncremental(deps: SnapshotDeps, progress: SnapshotProgress, resumed: boolean): void {
  const { config, log, state, control } = deps;
  const inc = createIncrementalSnapshot({
    connection: config.source.connection,
    progress,
    store: { load: () => Promise.resolve(state.progress), save: (p, covered) => saveSnapshotProgress(state, p, covered) },
    chunkSize: incrementalChunkRows(config),
    // Chunks land in their order however far the reader is ahead (transaction-router.ts).
    readAhead: config.snapshot.readAhead,
    publications: config.source.publication,
    onRetry: (chunk, attempt) => log.warn('snapshot: chunk must be read again', { table: chunk.table, attempt, blockedBy: chunk.blockedBy }),
  });
  state.incremental = inc;
  if (resumed) {
    const tables = progress.tables.filter((t) => t.status !== 'done').map((t) => ({ table: t.table, status: t.status, lastKey: t.lastKey }));
    log.info('snapshot: resuming the interrupted snapshot incrementally while streaming', { generation: progress.generation, kind: progress.kind, tables });
  }
  void inc.run().then(
    (final) => {
      state.done = true;
      state.incremental = null;
      void inc.close();
      const begin = state.begin;
      state.begin = null;
      void closeFirstChanges(begin);
      log.info(resumed ? 'snapshot: complete (resumed)' : 'snapshot: complete', {
        generation: final.generation, kind: final.kind, rows: state.counts.rows, events: state.counts.events, ...(begin ? { firstChanges: begin.counts } : {}),
      });
      if (state.info?.stopAfter) {
        deps.snapshotDone();
        return;
      }
      startNextRequest(deps);
    },
    (error: unknown) => {
      if (!control.stopRequested) control.fail(error);
    },
  );
}

/** Starts the oldest queued ad hoc request, if any and nothing runs. */
export function startNextRequest(deps: SnapshotDeps): void {
  const { state, control } = deps;
  const next = state.requests.queued[0];
  if (!next || state.incremental || state.adHocStarting || control.stopRequested) return;
  state.requests = { ...state.requests, queued: state.requests.queued.slice(1) };
  startAdHoc(deps, next, next.lsn).catch((error: unknown) => {
    if (!control.stopRequested) control.fail(error);
  });
}

/** Why the request's tables cannot be snapshotted (not captured, missing, no key), or `null`. */
async function refuseRequestTables(deps: SnapshotDeps, request: SnapshotRequest): Promise<string | null> {
  const { source } = deps.config;
  const captured = source.tables.map((t) => t.table);
  const uncaptured = request.tables.filter((t) => !captured.includes(t));
  if (uncaptured.length > 0) return `not captured by this assembler: ${uncaptured.join(', ')} (captured: ${captured.join(', ')})`;
  // A connection failure is the run's error; a table that cannot be snapshotted is the request's.
  return withClient(source.connection, async (client) => {
    try {
      for (const table of request.tables) requireKey(await describeTable(client, table, { publications: source.publication }));
      return null;
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  });
}

/**
 * A new generation of the requested tables, read incrementally while streaming. The progress
 * (with the request) is saved before returning — i.e. before the request's transaction can be
 * acknowledged — so a crash either re-sends the request or resumes this generation.
 */
async function startAdHoc(deps: SnapshotDeps, request: SnapshotRequest, lsn: Lsn): Promise<void> {
  const { state, config, log } = deps;
  state.adHocStarting = true;
  try {
    const previousGeneration = state.progress?.generation ?? null;
    const progress = adHocSnapshotProgress({
      tables: request.tables,
      capturedTables: config.source.tables.map((t) => t.table),
      lastGeneration: previousGeneration,
      reason: `ad hoc snapshot of ${request.tables.join(', ')} requested${request.requestedBy ? ` by ${request.requestedBy}` : ''} at ${request.requestedAt} (request ${request.id}, message at ${lsn})`,
      request: { id: request.id, lsn },
    });
    state.pinned.clear();
    state.inheritedPins.clear();
    await saveSnapshotProgress(state, progress);
    state.done = false;
    state.info = { action: 'ad-hoc-snapshot', code: 'SNAPSHOT_REQUESTED', reason: progress.reason, generation: progress.generation, consistentPoint: null, stopAfter: false };
    log.info('snapshot: ad hoc snapshot started as a new generation', { generation: progress.generation, previousGeneration, tables: request.tables, request: request.id, lsn, queued: state.requests.queued.length });
    startIncremental(deps, progress, false);
  } finally {
    state.adHocStarting = false;
  }
}

export function hasSnapshotRequest(changes: readonly Change[]): boolean {
  for (const change of changes) if (change.op === 'message' && change.prefix === SNAPSHOT_REQUEST_PREFIX) return true;
  return false;
}

/**
 * The hook of the transaction loop: ad hoc snapshot requests in a committed transaction's
 * messages. Resolves once each is durable in the snapshot store (started, queued or refused) —
 * before the transaction is handed on, so before it can be acknowledged.
 */
export async function takeSnapshotRequests(deps: SnapshotDeps, tx: CommittedTransaction, changes: Iterable<Change>): Promise<void> {
  const { state, config, log } = deps;
  const messages: MessageChange[] = [];
  for (const change of changes) if (change.op === 'message' && change.prefix === SNAPSHOT_REQUEST_PREFIX) messages.push(change);
  for (const change of messages) {
    const request = decodeSnapshotRequest(change.content);
    if (!request) {
      log.warn('snapshot: ignoring a malformed snapshot request message', { lsn: change.lsn, commitLsn: tx.commitLsn });
      continue;
    }
    // Another assembler's request, or one the slot re-sends after a restart.
    if (request.assembler !== config.name || state.requests.handled.includes(request.id)) continue;
    if (!state.store) {
      log.warn('snapshot: ad hoc snapshot request ignored: this assembler runs with a custom sink and keeps no snapshot state', { request: request.id, lsn: change.lsn });
      continue;
    }
    state.systemId ??= tx.position.systemId;
    state.requests = { ...state.requests, handled: [...state.requests.handled, request.id].slice(-HANDLED_REQUESTS_KEPT) };
    const refused = await refuseRequestTables(deps, request);
    if (refused !== null) {
      log.warn('snapshot: ad hoc snapshot request refused', { request: request.id, tables: request.tables, lsn: change.lsn, reason: refused });
      if (state.progress) await saveSnapshotProgress(state, () => state.progress!);
      continue;
    }
    if (state.incremental !== null || state.adHocStarting || (state.progress !== null && !isSnapshotFinished(state.progress))) {
      state.requests = { ...state.requests, queued: [...state.requests.queued, { ...request, lsn: change.lsn }] };
      await saveSnapshotProgress(state, () => state.progress!);
      log.info('snapshot: ad hoc snapshot request queued behind the running snapshot', { request: request.id, tables: request.tables, lsn: change.lsn, running: state.progress?.generation ?? null, queued: state.requests.queued.length });
      continue;
    }
    await startAdHoc(deps, request, change.lsn);
  }
}
