/**
 * When to snapshot: a pure decision from the configured mode, the stored source position, the
 * slot's state and any unfinished snapshot progress. The result is a record that says what to
 * do and why, for the log and for `status`.
 *
 * - `initial`: snapshot when no position is stored; never re-snapshot on its own — a stored
 *   position the slot can no longer serve is refused (DESIGN.md invariant 7).
 * - `never`: stream only; likewise refuses an unservable position.
 * - `when_needed`: like `initial`, and when the stored position can no longer be served it
 *   starts a NEW generation (new slot, new snapshot) instead of refusing — never a silent
 *   restart under the old generation.
 * - `initial_only`: snapshot (when none finished yet), then stop.
 *
 * An interrupted initial snapshot resumes incrementally (same generation) from its progress
 * while streaming from the slot's consistent point — see docs/snapshots.md.
 */
import type { Lsn } from '../types.js';
import { isSnapshotFinished, type SnapshotProgress } from './progress.js';

export const SNAPSHOT_MODES = ['initial', 'never', 'when_needed', 'initial_only'] as const;
export type SnapshotMode = (typeof SNAPSHOT_MODES)[number];

export interface SlotState {
  readonly exists: boolean;
  /** `pg_replication_slots.wal_status` (`reserved`, `extended`, `unreserved`, `lost`). */
  readonly walStatus?: string | null;
  readonly confirmedFlushLsn?: Lsn | null;
}

export interface SnapshotDecisionInput {
  readonly mode: SnapshotMode;
  /** Commit LSN of the stored checkpoint (what is durable downstream); `null` when none is stored. */
  readonly storedLsn: Lsn | null;
  readonly slot: SlotState;
  /** Saved progress of the latest snapshot, finished or not; `null` when none. */
  readonly progress: SnapshotProgress | null;
  /** Last generation used (progress or checkpoint); `null` when none. */
  readonly lastGeneration: string | null;
}

export type SnapshotAction =
  /** Stream from the stored position (or the slot's) — no snapshot. */
  | 'stream'
  /** Create the slot with an exported snapshot, read it, stream from its consistent point. */
  | 'initial-snapshot'
  /** The initial snapshot was interrupted: stream from the slot, read the rest incrementally. */
  | 'resume-snapshot'
  /** Drop the unservable slot, create a new one with a snapshot: a new generation. */
  | 'new-generation'
  /** Nothing left to do (`initial_only` after its snapshot). */
  | 'stop'
  /** Do not start: the stored position cannot be served; rebuild needed. */
  | 'refuse';

export interface SnapshotDecision {
  readonly action: SnapshotAction;
  readonly mode: SnapshotMode;
  /** Generation of the snapshot to run or resume; `null` when none runs. */
  readonly generation: string | null;
  /** Stop after the snapshot instead of streaming (`initial_only`). */
  readonly stopAfterSnapshot: boolean;
  /** Drop the existing slot first (`initial-snapshot` over a slot made without a snapshot, `new-generation`). */
  readonly recreateSlot: boolean;
  /** One sentence: why. */
  readonly reason: string;
  /** Stable code of the situation, e.g. `NO_STORED_POSITION`, `SLOT_LOST`. */
  readonly code: string;
}

/** `null` → `1`; a decimal → its successor; anything else → `<it>.1` (generations only ever grow). */
export function nextGeneration(last: string | null): string {
  if (last === null) return '1';
  if (/^\d+$/.test(last)) return (BigInt(last) + 1n).toString();
  return `${last}.1`;
}

function lsnValue(lsn: Lsn): bigint {
  const [hi = '0', lo = '0'] = lsn.split('/');
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`);
}

/** Why the stored position cannot be served, or `null` when it can. */
export function unservableReason(storedLsn: Lsn, slot: SlotState): { code: string; reason: string } | null {
  if (!slot.exists) return { code: 'SLOT_MISSING', reason: `the replication slot no longer exists, so the changes after the stored position ${storedLsn} are gone` };
  if (slot.walStatus === 'lost') return { code: 'SLOT_LOST', reason: `the replication slot was invalidated (wal_status = 'lost'): the WAL after the stored position ${storedLsn} was removed` };
  if (slot.confirmedFlushLsn && lsnValue(slot.confirmedFlushLsn) > lsnValue(storedLsn)) {
    return { code: 'POSITION_BEHIND_SLOT', reason: `the slot's confirmed_flush_lsn ${slot.confirmedFlushLsn} is past the stored position ${storedLsn}: the changes in between cannot be sent again` };
  }
  return null;
}

export function decideSnapshot(input: SnapshotDecisionInput): SnapshotDecision {
  const { mode, slot, progress, lastGeneration } = input;
  // An initial snapshot's consistent point is a durable position too: everything before it is in
  // the snapshot. After a new generation the checkpoint may still name the old slot's last
  // position (nothing streamed yet), while the new slot starts at the consistent point.
  const storedLsn = input.storedLsn !== null && progress?.kind === 'initial' && progress.consistentPoint && lsnValue(progress.consistentPoint) > lsnValue(input.storedLsn)
    ? progress.consistentPoint
    : input.storedLsn;
  const base = { mode, stopAfterSnapshot: mode === 'initial_only', recreateSlot: false };
  const unfinished = progress !== null && !isSnapshotFinished(progress);

  // An interrupted snapshot comes first: its generation is already (partly) downstream.
  if (unfinished && progress) {
    // The slot must still hold every change after what is durable: the stored position, or —
    // nothing streamed yet — the consistent point of the interrupted initial snapshot.
    const from = storedLsn ?? progress.consistentPoint;
    const gone = from
      ? unservableReason(from, slot)
      : !slot.exists
        ? { code: 'SLOT_MISSING', reason: 'its replication slot no longer exists' }
        : slot.walStatus === 'lost'
          ? { code: 'SLOT_LOST', reason: `its replication slot was invalidated (wal_status = 'lost')` }
          : null;
    if (gone === null) {
      return {
        ...base, action: 'resume-snapshot', generation: progress.generation, code: 'SNAPSHOT_INTERRUPTED',
        reason: `snapshot generation ${progress.generation} (${progress.kind}) was interrupted with ${progress.tables.filter((t) => t.status !== 'done').length} table(s) unfinished; resuming after the last durable chunk while streaming from the slot`,
      };
    }
    const code = gone.code === 'SLOT_MISSING' ? 'SNAPSHOT_INTERRUPTED_SLOT_GONE' : gone.code;
    const what = `snapshot generation ${progress.generation} (${progress.kind}) was interrupted and cannot be resumed: ${gone.reason}`;
    if (mode === 'when_needed') {
      const generation = nextGeneration(lastGeneration ?? progress.generation);
      return {
        ...base, action: 'new-generation', recreateSlot: slot.exists, generation, code,
        reason: `${what}; mode 'when_needed' starts snapshot generation ${generation} with a new slot`,
      };
    }
    return { ...base, action: 'refuse', generation: null, code, reason: `${what}; refusing to start (mode '${mode}'): rebuild with a new slot and a new snapshot generation, or use mode 'when_needed'` };
  }

  if (storedLsn === null) {
    if (mode === 'never') {
      return { ...base, action: 'stream', generation: null, code: 'NO_STORED_POSITION_NO_SNAPSHOT', reason: `no stored position and mode 'never': streaming from the slot's position without reading existing rows` };
    }
    if (mode === 'initial_only' && progress !== null && isSnapshotFinished(progress)) {
      return { ...base, action: 'stop', generation: null, code: 'SNAPSHOT_DONE', reason: `snapshot generation ${progress.generation} is complete and mode 'initial_only' does not stream` };
    }
    if (slot.exists) {
      // A slot without a stored position: its exported snapshot is long gone. Re-create it
      // so the snapshot and the stream meet exactly at a consistent point.
      return { ...base, action: 'initial-snapshot', recreateSlot: true, generation: nextGeneration(lastGeneration), code: 'NO_STORED_POSITION_SLOT_EXISTS', reason: `no stored position, and the existing slot has no exported snapshot left: re-creating it with one (nothing was streamed from it) for a gap-free initial snapshot` };
    }
    return { ...base, action: 'initial-snapshot', generation: nextGeneration(lastGeneration), code: 'NO_STORED_POSITION', reason: 'no stored position: reading existing rows at the new slot\'s exported snapshot, then streaming from its consistent point' };
  }

  if (mode === 'initial_only') {
    return { ...base, action: 'stop', generation: null, code: 'SNAPSHOT_DONE', reason: `a position is stored, so the initial snapshot already ran; mode 'initial_only' does not stream` };
  }
  const unservable = unservableReason(storedLsn, slot);
  if (unservable === null) {
    return { ...base, action: 'stream', generation: null, code: 'POSITION_SERVABLE', reason: `resuming from the stored position ${storedLsn}` };
  }
  if (mode === 'when_needed') {
    return {
      ...base, action: 'new-generation', recreateSlot: slot.exists, generation: nextGeneration(lastGeneration), code: unservable.code,
      reason: `${unservable.reason}; mode 'when_needed' starts snapshot generation ${nextGeneration(lastGeneration)} with a new slot (consumers see a new generation and reconcile)`,
    };
  }
  return { ...base, action: 'refuse', generation: null, code: unservable.code, reason: `${unservable.reason}; refusing to stream (mode '${mode}'): rebuild with a new slot and a new snapshot generation, or use mode 'when_needed'` };
}
