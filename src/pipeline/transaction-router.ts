/**
 * Which way a transaction from the source goes: straight to the transaction handler (in memory,
 * no snapshot running — the common case, synchronous), through its change sequence (a large
 * transaction, spill file released once queued), or through the running incremental snapshot's
 * watermark window (which may interleave snapshot records). Ad hoc snapshot requests in it are
 * taken first, so they are durable before the transaction can be acknowledged.
 */
import { readChanges, readChangesNow, type CommittedTransaction } from '../buffer/index.js';
import { isHeartbeatOnly } from '../source/heartbeat.js';
import type { ChunkSummary, IncrementalSnapshot } from '../source/snapshot/index.js';
import type { Change, ChangeSequence, SnapshotRecord } from '../source/types.js';
import { isLargeTransaction } from './slices.js';
import { applyFirstChanges, skipMarked, tableFinished } from './snapshot-first-change.js';
import { hasSnapshotRequest, takeSnapshotRequests } from './snapshot-requests.js';
import { deliverSnapshotRecords, unpinRecords, type SnapshotDeps } from './snapshot-state.js';

/** One transaction from the source, whichever way it has to go; `undefined` when it was handled synchronously. */
export function routeTransaction(deps: SnapshotDeps, tx: CommittedTransaction): Promise<void> | undefined {
  const inc = deps.state.incremental;
  if (inc && deps.state.systemId) return handleWithWindow(deps, tx, inc, deps.state.systemId);
  if (isLargeTransaction(tx)) return handleLarge(deps, tx);
  // Small transactions are in memory anyway: look for ad hoc snapshot requests (their own tiny
  // transactions, see source/snapshot/request.ts) before handing the changes on.
  const changes = readChangesNow(tx);
  if (changes === null) return readChanges(tx).then((read) => handleChanges(deps, tx, read));
  return handleChanges(deps, tx, changes);
}

/**
 * A heartbeat (source/heartbeat.ts) is a small transaction of its own holding only heartbeat
 * messages: no mapper sees it, its position is acknowledged once everything before it is durable.
 * Per transaction this costs one comparison (`messageCount`), unless it holds messages.
 */
function isHeartbeat(tx: CommittedTransaction, changes: readonly Change[]): boolean {
  return tx.messageCount > 0 && tx.messageCount === changes.length && isHeartbeatOnly(changes);
}

function handleChanges(deps: SnapshotDeps, tx: CommittedTransaction, changes: Change[]): Promise<void> | undefined {
  if (isHeartbeat(tx, changes)) return deps.handler.handleHeartbeat(tx);
  if (hasSnapshotRequest(changes)) return takeSnapshotRequests(deps, tx, changes).then(() => deps.handler.handleTransaction(tx, changes));
  return deps.handler.handleTransaction(tx, changes);
}

/** A large transaction: its spill file (if any) is released once all of it is queued. */
async function handleLarge(deps: SnapshotDeps, tx: CommittedTransaction): Promise<void> {
  try {
    const sequence = tx.sequence();
    // Requests come in tiny transactions of their own; a large one is read for them only when it holds messages.
    if (tx.messageCount > 0) await takeSnapshotRequests(deps, tx, sequence);
    await deps.handler.handleLargeTransaction(tx, sequence);
  } finally {
    await tx.release();
  }
}

/** While an incremental snapshot runs, every transaction passes its watermark window. */
async function handleWithWindow(deps: SnapshotDeps, tx: CommittedTransaction, inc: IncrementalSnapshot, systemId: string): Promise<void> {
  const large = isLargeTransaction(tx);
  try {
    const changes: ChangeSequence = large ? tx.sequence() : await readChanges(tx);
    if (!large || tx.messageCount > 0) await takeSnapshotRequests(deps, tx, changes);
    // A resumed initial snapshot: before-image records of first changes queued ahead of the
    // transaction; it is acknowledged only once they are durable and its marks saved.
    const gate = deps.state.begin ? (await applyFirstChanges(deps, tx, changes, systemId))?.until ?? null : null;
    gate?.catch(() => undefined); // its failure is handled where the transaction waits for it
    let records: SnapshotRecord[] = [];
    for (const output of inc.window.accept({ xid: tx.xid }, changes)) {
      if (output.kind === 'transaction') {
        if (large) await deps.handler.handleLargeTransaction(tx, changes, gate);
        else if (!gate && isHeartbeat(tx, changes as Change[])) deps.handler.handleHeartbeat(tx);
        else await deps.handler.handleTransaction(tx, changes as Change[], gate);
      }
      else if (output.kind === 'snapshot') records.push(output.record);
      else {
        const delivered = skipMarked(deps, records);
        records = [];
        // Queued (after the pins' save) ahead of every later transaction: their order is kept.
        const { keys, durable } = await deliverSnapshotRecords(deps.state, deps, { records: delivered, lsn: tx.commitLsn, systemId, progress: inc.progress() });
        // Chunks land in their order (with `snapshot.readAhead` several are in flight): no chunk is saved before the one ahead of it.
        const landed = landChunk(deps, inc, output.chunk, delivered, keys, durable, deps.state.landing);
        // A resumed initial snapshot's first-change rule asks the saved progress whether a later
        // change's row was read (snapshot-first-change.ts): there the stream waits for the save.
        if (deps.state.begin) await landed;
        else deps.state.landing = landed.catch((error: unknown) => {
          if (!deps.control.stopRequested) deps.control.fail(error);
        });
      }
    }
  } finally {
    if (large) await tx.release();
  }
}

/**
 * Once a chunk's records are durable: its progress saved (the record that no longer pins them:
 * one save per chunk, not two), which lets the reader take the next chunk. Meanwhile the stream
 * goes on — a transaction after the high watermark does not wait for the chunk to land (it did
 * until 2026-12-05; at 10 ms per append that halved a concurrent writer's p50 commit → durable:
 * bench/results/2026-12-05-chunk-landing.md). A crash before the save reads the chunk again; its pinned records that
 * landed are recognised by event id (snapshot-landed.ts), however far the slot went meanwhile.
 */
async function landChunk(
  deps: SnapshotDeps, inc: IncrementalSnapshot, chunk: ChunkSummary, delivered: readonly SnapshotRecord[], keys: readonly string[], durable: Promise<void>,
  before: Promise<void>,
): Promise<void> {
  // A stop first: no save starts after it (the attempt closes the store); a restart reads the chunk again.
  // Its appends failing after the stop (the sinks closed) is expected: observed here, not unhandled.
  durable.catch(() => undefined);
  if ((await deps.control.until(durable)) === 'stop') return;
  // The chunk before it lands first (`before` is settled either way; a failure there stopped the run).
  await before;
  if (deps.control.stopRequested) return;
  await inc.chunkDurable(chunk, keys);
  // The save dropped these pins already, unless the reader ignored the marker; `keys` holds every
  // pin still set for `delivered` (those recognised as landed went at delivery): no key made again.
  unpinRecords(deps.state, delivered, keys);
  if (inc.progress().tables.find((t) => t.table === chunk.table)?.status === 'done') tableFinished(deps, chunk.table);
}
