/**
 * The start decision: from the system identity, the slot's state and the last position recorded
 * in the checkpoint stream, whether this run resumes, refuses (REBUILD_NEEDED), or starts a new
 * snapshot generation — docs/snapshots.md "Modes". The two decisions are pure; reading the last
 * checkpoint is the one I/O here.
 */
import { BACKWARDS, END, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { checkpointStreamName, readerConnectionString } from '../sink/index.js';
import { compareLsn } from '../source/position.js';
import { decideSnapshot, isSnapshotFinished, nextGeneration, unservableReason, type SnapshotDecision, type SnapshotProgress } from '../source/snapshot/index.js';
import type { Lsn } from '../source/types.js';
import { RebuildNeededError } from './errors.js';
import type { RunControl } from './run-control.js';
import type { SlotCheckRow, SlotState } from './source-queries.js';

export type SnapshotMode = 'initial' | 'never' | 'when_needed' | 'initial_only';

/** The last position this assembler recorded as durable (its checkpoint stream's last event). */
export interface LastCheckpoint {
  readonly endLsn: Lsn;
  readonly systemId: string | null;
  readonly slot: string | null;
  /** The source's timeline when it was recorded (`null`: a record written before timelines were recorded). */
  readonly timeline?: number | null;
}

/** Reads the checkpoint stream's last event (`null`: none yet). Retries a few times, ends on stop. */
export async function readLastCheckpoint(connectionString: string, assembler: string, control: RunControl): Promise<LastCheckpoint | null> {
  const client = KurrentDBClient.connectionString(readerConnectionString(connectionString));
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        for await (const resolved of client.readStream(checkpointStreamName(assembler), { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
          const position = (resolved.event?.data as { position?: { endLsn?: unknown; systemId?: unknown; slot?: unknown; timeline?: unknown } } | undefined)?.position;
          if (typeof position?.endLsn !== 'string') return null;
          return {
            endLsn: position.endLsn, systemId: typeof position.systemId === 'string' ? position.systemId : null, slot: typeof position.slot === 'string' ? position.slot : null,
            timeline: typeof position.timeline === 'number' ? position.timeline : null,
          };
        }
        return null;
      } catch (error) {
        if ((error as { type?: unknown }).type === 'stream-not-found') return null;
        if (attempt >= 5 || control.stopRequested) throw error;
        if (await control.sleep(200 * attempt)) throw error;
      }
    }
  } finally {
    await client.dispose().catch(() => undefined);
  }
}

/**
 * The slot against the last recorded checkpoint (DESIGN invariant 7): a slot confirmed beyond
 * what this assembler recorded was advanced by someone else, and the transactions in between
 * were never appended — REBUILD_NEEDED, never a silent restart. Gives the slot's confirmed
 * position (`null`: no slot, or — mode `when_needed` — a state the snapshot decision answers).
 */
export function checkSlotAgainstCheckpoint(row: SlotCheckRow | null, last: LastCheckpoint | null, options: { readonly slot: string; readonly mode: SnapshotMode; readonly assembler: string }): Lsn | null {
  if (!row || !row.confirmed_flush_lsn) return null; // the source's checks name a missing slot
  // Mode 'when_needed' answers an unservable slot with a new snapshot generation: the snapshot
  // decision (decideStart) sees the same slot state and says so, loudly.
  const deferToDecision = options.mode === 'when_needed';
  if (row.wal_status === 'lost') {
    if (deferToDecision) return null;
    throw new RebuildNeededError(`replication slot "${options.slot}" was invalidated (wal_status = 'lost'): the WAL it needed is gone`, { slot: options.slot });
  }
  const sameSystem = last && (!last.systemId || !row.system_identifier || last.systemId === row.system_identifier);
  if (last && sameSystem && compareLsn(row.confirmed_flush_lsn, last.endLsn) > 0) {
    if (deferToDecision) return null;
    const stream = checkpointStreamName(options.assembler);
    throw new RebuildNeededError(
      `replication slot "${options.slot}" has confirmed_flush_lsn ${row.confirmed_flush_lsn}, ahead of the last position this assembler recorded as durable ` +
        `(${last.endLsn} in ${stream}${last.slot ? `, slot "${last.slot}"` : ''}): someone else advanced the slot, and the transactions in between were never appended`,
      { slot: options.slot, confirmedFlushLsn: row.confirmed_flush_lsn, checkpointLsn: last.endLsn, checkpointStream: stream },
    );
  }
  return row.confirmed_flush_lsn;
}

/**
 * Where streaming resumes when the slot lags the checkpoint stream: the last recorded position,
 * else `null` (the slot's confirmed position). The slot lags when the previous run's last
 * acknowledgement did not reach PostgreSQL — a halt on a schema change closes the replication
 * connection at once, a crash can fall between recording and acknowledging. PostgreSQL starts
 * at the greater of the requested position and confirmed_flush_lsn and skips the transactions
 * committed before it (START_REPLICATION), so what is recorded durable is not sent again — which
 * matters after a column rename: a replay of the old shape would stop the mapper already updated
 * for the new one. Only a checkpoint of this slot on this very system counts (`systemId` known on
 * both sides): LSNs of another cluster say nothing about this one, and skipping by them loses data.
 */
export function resumePoint(row: SlotCheckRow | null, last: LastCheckpoint | null, slot: string, systemId: string | null): Lsn | null {
  if (!row?.confirmed_flush_lsn || !last || last.slot !== slot || !last.systemId || last.systemId !== systemId) return null;
  return compareLsn(last.endLsn, row.confirmed_flush_lsn) > 0 ? last.endLsn : null;
}

export interface StartDecisionInput {
  readonly mode: SnapshotMode;
  /** The last recorded checkpoint position, if any. */
  readonly storedLsn: Lsn | null;
  readonly slot: SlotState;
  readonly slotName: string;
  /** The latest snapshot generation's stored progress, if any. */
  readonly progress: SnapshotProgress | null;
}

/** The start-up decision (docs/snapshots.md "Modes"), with the pipeline's refinements over `decideSnapshot`. */
export function decideStart(input: StartDecisionInput): SnapshotDecision {
  const { mode, storedLsn, slot, progress } = input;
  if (
    progress && isSnapshotFinished(progress) && slot.exists && (progress.slot === input.slotName || progress.kind !== 'initial') &&
    (mode === 'initial' || (mode === 'when_needed' && storedLsn === null))
  ) {
    // The latest snapshot is complete; streaming may not have recorded a position yet.
    const from = storedLsn ?? progress.consistentPoint;
    const gone = mode !== 'when_needed' ? null : from ? unservableReason(from, slot) : slot.walStatus === 'lost' ? { code: 'SLOT_LOST', reason: `the replication slot was invalidated (wal_status = 'lost')` } : null;
    if (gone === null) {
      return { action: 'stream', mode, generation: null, stopAfterSnapshot: false, recreateSlot: false, code: 'SNAPSHOT_DONE', reason: `snapshot generation ${progress.generation} is complete: streaming from slot ${input.slotName}` };
    }
    const generation = nextGeneration(progress.generation);
    return {
      action: 'new-generation', mode, generation, stopAfterSnapshot: false, recreateSlot: true, code: gone.code,
      reason: `${gone.reason}; mode 'when_needed' starts snapshot generation ${generation} with a new slot (consumers see a new generation and reconcile)`,
    };
  }
  return decideSnapshot({ mode, storedLsn, slot, progress, lastGeneration: progress?.generation ?? null });
}
