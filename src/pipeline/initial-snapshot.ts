/**
 * The initial snapshot phase (modes `initial`, `when_needed`, `initial_only`): the slot created
 * with an exported snapshot (dropped first when a new generation needs a new slot), every
 * captured table read at it in chunks and made durable, progress saved after each chunk so an
 * interrupted snapshot resumes; once complete, its consistent point is recorded as a checkpoint.
 */
import { EventAssemblerError } from '../errors.js';
import { createSlotWithSnapshot, isSnapshotFinished, newSnapshotProgress, readInitialSnapshot, updateTable, type SnapshotDecision } from '../source/snapshot/index.js';
import { deliverSnapshotRecords, saveSnapshotProgress, unpinRecords, type SnapshotDeps } from './snapshot-state.js';
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
    for await (const batch of readInitialSnapshot({
      connection: config.source.connection, snapshotName: exported.snapshotName, tables, snapshotGeneration: generation,
      parallelism: config.snapshot.parallelism, batchRows: config.snapshot.chunkSize, publications: config.source.publication,
    })) {
      if (control.stopRequested) break;
      await deliverSnapshotRecords(state, deps, { records: batch.records, lsn: exported.consistentPoint, systemId, progress });
      const entry = progress.tables.find((t) => t.table === batch.table)!;
      progress = updateTable(progress, batch.table, {
        status: batch.tableDone ? 'done' : 'running',
        lastKey: batch.lastKey ?? entry.lastKey,
        rowsDone: batch.rowsDone,
        estimatedRows: batch.estimatedRows,
        chunksDone: entry.chunksDone + (batch.records.length > 0 ? 1 : 0),
      });
      await saveSnapshotProgress(state, progress);
      unpinRecords(state, batch.records);
      if (batch.tableDone) log.info('snapshot: table done', { table: batch.table, rows: batch.rowsDone, generation });
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
