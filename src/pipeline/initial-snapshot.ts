/**
 * The initial snapshot phase (modes `initial`, `when_needed`, `initial_only`): the slot created
 * with an exported snapshot (dropped first when a new generation needs a new slot), every
 * captured table read at it in chunks and made durable, progress saved after each chunk so an
 * interrupted snapshot resumes; once complete, its consistent point is recorded as a checkpoint.
 *
 * Chunks are pinned one ahead: when chunk k+1 is read, its records get their positions and the
 * progress record that pins them is sent at once; then chunk k — pinned by the record sent a chunk
 * earlier — is mapped and queued, while chunk k-1 is still being appended. So a chunk's save goes
 * to the destination ahead of the previous chunk's appends, and is durable by the time the chunk
 * is queued: neither side waits for the other (bench/results/2026-12-07-pin-ahead.md). One progress
 * record per chunk carries the pins of every chunk read and not yet covered (k-1, k, k+1) and the
 * progress of every chunk before them that is durable; a chunk's pins leave with the record that
 * records its progress (the first record not to list them is the one that covers them, so no save
 * ever holds neither).
 * A restart finds every record handed to the sink either covered by the progress or pinned.
 */
import { initialChunkRows } from '../config/schema.js';
import { EventAssemblerError } from '../errors.js';
import { createSlotWithSnapshot, isSnapshotFinished, newSnapshotProgress, readInitialSnapshot, updateTable, type SnapshotBatch, type SnapshotDecision, type SnapshotProgress } from '../source/snapshot/index.js';
import { mapWhileSaving, pinKeysOf, pinRecords, queueSnapshotRecords, saveSnapshotProgress, type SnapshotDeps, type SnapshotState } from './snapshot-state.js';
import type { PinnedPosition } from './snapshot-store.js';
import { dropSlot, identifySystem, slotState } from './source-queries.js';

/** Creates the slot with an exported snapshot, reads every captured table at it and makes the records durable. */
export async function runInitialSnapshotPhase(deps: SnapshotDeps, decision: SnapshotDecision, systemId: string): Promise<void> {
  const { config, log, state, control } = deps;
  const generation = decision.generation!;
  if (decision.recreateSlot) {
    const slot = await slotState(config.source.connection, config.source.slot);
    if (slot.active) throw new EventAssemblerError('SNAPSHOT_SLOT_ACTIVE', `replication slot "${config.source.slot}" must be re-created for the initial snapshot (${decision.reason}), but another process is streaming from it`, { slot: config.source.slot });
    log.warn('snapshot: dropping the slot to re-create it with an exported snapshot', { slot: config.source.slot, reason: decision.reason });
    await dropSlot(config.source.connection, config.source.slot);
  }
  const exported = await createSlotWithSnapshot({ connection: config.source.connection, slot: config.source.slot });
  try {
    const tables = config.source.tables.map((t) => t.table);
    let progress = newSnapshotProgress({ generation, kind: 'initial', mode: config.snapshot.mode, tables, reason: decision.reason, slot: exported.slot, consistentPoint: exported.consistentPoint });
    state.pinned.clear();
    state.inheritedPins.clear();
    await saveSnapshotProgress(state, progress);
    state.info = { ...state.info!, consistentPoint: exported.consistentPoint };
    log.info('snapshot: slot created with an exported snapshot; reading captured tables', { slot: exported.slot, consistentPoint: exported.consistentPoint, generation, tables, parallelism: config.snapshot.parallelism });
    /** The chunk read and pinned last (its save sent): handed to the sink when the next one is read. */
    let pending: PinnedChunk | null = null;
    /** The chunk handed to the sink before the current one: its progress is recorded once it is durable. */
    let previous: InFlightChunk | null = null;
    /** Pin keys of durable chunks whose progress the next save records (and drops the pins with). */
    let covered: string[] = [];
    const landed = async (chunk: InFlightChunk): Promise<void> => {
      await chunk.durable;
      progress = chunkProgress(progress, chunk.batch);
      for (const key of chunk.keys) covered.push(key);
      if (chunk.batch.tableDone) log.info('snapshot: table done', { table: chunk.batch.table, rows: chunk.batch.rowsDone, generation });
    };
    /** Maps and queues `chunk`, then waits for `before` (the chunk queued before it) to be durable. */
    const handOverNext = async (chunk: PinnedChunk, before: InFlightChunk | null): Promise<InFlightChunk> => {
      const current = await handOver(state, deps, chunk, systemId);
      if (before) await landed(before);
      return current;
    };
    try {
      for await (const batch of readInitialSnapshot({
        connection: config.source.connection, snapshotName: exported.snapshotName, tables, snapshotGeneration: generation,
        parallelism: config.snapshot.parallelism, batchRows: initialChunkRows(config), publications: config.source.publication,
        snapshotKind: 'initial',
      })) {
        if (control.stopRequested) break;
        const next = pinChunk(state, batch, progress, covered, exported.consistentPoint);
        if (next.saving) covered = [];
        if (pending) previous = await handOverNext(pending, previous);
        pending = next;
      }
      if (pending && !control.stopRequested) previous = await handOverNext(pending, previous);
      if (previous) {
        const last: InFlightChunk = previous;
        previous = null;
        await landed(last);
        await saveSnapshotProgress(state, progress, covered);
      }
    } finally {
      pending?.saving?.catch(() => undefined);
      previous?.durable.catch(() => undefined);
    }
    if (isSnapshotFinished(progress)) {
      state.done = true;
      log.info('snapshot: complete', { generation, rows: state.counts.rows, events: state.counts.events, consistentPoint: exported.consistentPoint });
      // Everything before the consistent point is in the snapshot: record it, so that a restart
      // before anything streams compares the new slot with this position (not the old slot's).
      await deps.checkpoints.recordConsistentPoint(exported.consistentPoint, systemId, async () => (await identifySystem(config.source.connection)).timeline);
    }
  } finally {
    await exported.close();
  }
}

/** A chunk whose records have their positions, and the save that pins them sent (`null`: a chunk without records, nothing to save). */
interface PinnedChunk {
  readonly batch: SnapshotBatch;
  readonly keys: readonly string[];
  readonly keyTexts: readonly string[];
  readonly positions: readonly PinnedPosition[];
  readonly saving: Promise<void> | null;
}

interface InFlightChunk {
  readonly batch: SnapshotBatch;
  /** The records' pin keys (snapshot-state.ts `pinKey`). */
  readonly keys: readonly string[];
  readonly durable: Promise<void>;
}

/**
 * Pins the chunk's records and sends the save that records their positions — with `progress`
 * and every pin still held (the chunks before, in flight), less the `covered` ones, whose records
 * `progress` covers. Nothing of the chunk is appended before that save is durable ({@link handOver}).
 */
function pinChunk(state: SnapshotState, batch: SnapshotBatch, progress: SnapshotProgress, covered: readonly string[], lsn: string): PinnedChunk {
  if (batch.records.length === 0) return { batch, keys: [], keyTexts: [], positions: [], saving: null };
  const { keyTexts, keys } = pinKeysOf(batch.records);
  const positions = pinRecords(state, keys, lsn);
  const saving = saveSnapshotProgress(state, progress, covered);
  saving.catch(() => undefined); // awaited when the chunk is handed over
  return { batch, keys, keyTexts, positions, saving };
}

/** Maps the chunk's records while the save that pins them completes, then queues them. Resolves once queued. */
async function handOver(state: SnapshotState, deps: SnapshotDeps, chunk: PinnedChunk, systemId: string): Promise<InFlightChunk> {
  const { batch, keys, keyTexts, positions, saving } = chunk;
  if (saving === null) return { batch, keys, durable: Promise.resolve() };
  const mapped = await mapWhileSaving(deps, saving, batch.records, 'initial', systemId);
  const queued = await queueSnapshotRecords(state, deps, { records: batch.records, positions, keys, keyTexts, systemId, kind: 'initial', unpin: false, mapped });
  queued.durable.catch(() => undefined); // awaited when the next chunk has been handed over
  return { batch, keys, durable: queued.durable };
}

/** The progress once `batch` is durable. */
function chunkProgress(progress: SnapshotProgress, batch: SnapshotBatch): SnapshotProgress {
  const entry = progress.tables.find((t) => t.table === batch.table)!;
  return updateTable(progress, batch.table, {
    status: batch.tableDone ? 'done' : 'running',
    lastKey: batch.lastKey ?? entry.lastKey,
    rowsDone: batch.rowsDone,
    estimatedRows: batch.estimatedRows,
    chunksDone: entry.chunksDone + (batch.records.length > 0 ? 1 : 0),
  });
}
