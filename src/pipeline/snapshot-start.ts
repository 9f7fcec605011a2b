/**
 * The snapshot part of start-up: the stored snapshot state loaded, the start decision taken
 * (start-decision.ts) and acted on — refuse with REBUILD_NEEDED, stop (`initial_only` already
 * done), run the initial snapshot phase (a first generation, or a new one when the slot can no
 * longer serve the stored position), resume an interrupted snapshot while streaming, or stream.
 */
import { isSnapshotFinished, type SnapshotDecision, type SnapshotProgress } from '../source/snapshot/index.js';
import type { Lsn } from '../source/types.js';
import { RebuildNeededError } from './errors.js';
import { runInitialSnapshotPhase } from './initial-snapshot.js';
import { StopBeforeStart } from './run-control.js';
import { decideStart } from './start-decision.js';
import type { SnapshotDeps } from './snapshot-state.js';
import { createKurrentDBSnapshotStore, snapshotProgressStreamName } from './snapshot-store.js';
import { identifySystem, slotState } from './source-queries.js';

/** Loads the stored snapshot state into the run's and decides how this run starts. */
async function loadAndDecide(deps: SnapshotDeps, storedLsn: Lsn | null): Promise<SnapshotDecision> {
  const { state, config } = deps;
  const stored = await (state.stored ?? state.store!.load());
  state.stored = null;
  state.progress = stored?.progress ?? null;
  state.requests = stored?.requests ?? { queued: [], handled: [] };
  for (const [k, v] of stored?.pinned ?? []) state.pinned.set(k, v);
  state.storedMarks = stored?.marks ?? [];
  state.inheritedPins.clear();
  for (const key of state.pinned.keys()) state.inheritedPins.add(key);
  // Positions handed out before the restart are never handed out again (same LSN, same generation).
  state.sequence = Math.max(state.sequence, stored?.sequence ?? 0, ...[...state.pinned.values()].map((p) => p.sequence));
  const slot = await slotState(config.source.connection, config.source.slot);
  return decideStart({ mode: config.snapshot.mode, storedLsn, slot, slotName: config.source.slot, progress: stored?.progress ?? null });
}

function logDecision(deps: SnapshotDeps, decision: SnapshotDecision): void {
  const { config, log } = deps;
  log.info('snapshot: decision', { mode: config.snapshot.mode, action: decision.action, code: decision.code, reason: decision.reason, generation: decision.generation, progressStream: snapshotProgressStreamName(config.name) });
}

/**
 * Takes and acts on the start decision. Gives the interrupted snapshot to resume while streaming
 * (`null`: none); throws RebuildNeededError (refuse) or StopBeforeStart (nothing to stream).
 * `running()` is called when the run starts working (the initial snapshot phase).
 */
export async function startSnapshots(deps: SnapshotDeps, storedLsn: Lsn | null, running: () => void): Promise<SnapshotProgress | null> {
  const { state, config, log, control } = deps;
  if (!state.store && config.snapshot.mode !== 'never') state.store = createKurrentDBSnapshotStore(config.destination.connectionString, config.name, config.destination.retry ?? {});
  if (config.snapshot.mode === 'never') {
    // No snapshot of its own, but an interrupted ad hoc snapshot resumes (and queued requests
    // start). With a custom sink (benchmarks) the destination is never contacted: no snapshot state.
    const decision = state.store ? await loadAndDecide(deps, storedLsn) : null;
    // A recorded position and no slot (dropped, or a promoted standby that did not have it
    // synchronized — docs/failover.md): streaming from a new slot would skip what came between.
    if (decision?.action === 'refuse' && decision.code === 'SLOT_MISSING') throw new RebuildNeededError(decision.reason, { slot: config.source.slot, code: decision.code });
    if (decision?.action !== 'resume-snapshot') return null;
    state.info = { action: decision.action, code: decision.code, reason: decision.reason, generation: decision.generation, consistentPoint: null, stopAfter: false };
    logDecision(deps, decision);
    state.systemId = (await identifySystem(config.source.connection)).systemId;
    return state.progress;
  }
  const decision = await loadAndDecide(deps, storedLsn);
  const previousGeneration = state.progress?.generation ?? null;
  state.info = { action: decision.action, code: decision.code, reason: decision.reason, generation: decision.generation, consistentPoint: state.progress?.consistentPoint ?? null, stopAfter: decision.stopAfterSnapshot };
  logDecision(deps, decision);
  switch (decision.action) {
    case 'refuse':
      throw new RebuildNeededError(decision.reason, { slot: config.source.slot, code: decision.code });
    case 'stop':
      deps.snapshotDone();
      throw new StopBeforeStart();
    case 'new-generation':
    case 'initial-snapshot':
      // The stored progress belongs to the previous generation: status must not call this one finished.
      state.progress = null;
      if (decision.action === 'new-generation') {
        // Never silent: consumers see a new generation of every captured table and reconcile.
        log.warn('snapshot: the stored position cannot be served; starting a new snapshot generation with a new slot', {
          previousGeneration, generation: decision.generation, code: decision.code, reason: decision.reason, slot: config.source.slot,
        });
      }
      if (control.stopRequested) throw new StopBeforeStart();
      running();
      state.systemId = (await identifySystem(config.source.connection)).systemId;
      await runInitialSnapshotPhase(deps, decision, state.systemId);
      if (control.stopRequested) throw new StopBeforeStart();
      if (!state.done) throw new Error('unreachable: initial snapshot ended unfinished');
      if (decision.stopAfterSnapshot) {
        deps.snapshotDone();
        throw new StopBeforeStart();
      }
      return null;
    case 'resume-snapshot':
      state.systemId = (await identifySystem(config.source.connection)).systemId;
      return state.progress;
    case 'stream':
      state.done = state.progress !== null && isSnapshotFinished(state.progress);
      return null;
  }
}
