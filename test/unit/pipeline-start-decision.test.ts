// The start decision: the slot against the last recorded checkpoint (DESIGN invariant 7), and resume / refuse / new generation.
import { describe, expect, it } from 'vitest';
import { RebuildNeededError } from '../../src/pipeline/errors.js';
import type { SlotCheckRow, SlotState } from '../../src/pipeline/source-queries.js';
import { checkSlotAgainstCheckpoint, decideStart, resumePoint, type LastCheckpoint, type StartDecisionInput } from '../../src/pipeline/start-decision.js';
import { decideSnapshot, newSnapshotProgress, updateTable } from '../../src/source/snapshot/index.js';

const SYSTEM = '7000000000000000001';
const OTHER_SYSTEM = '7999999999999999999';
const initial = { slot: 'ea_slot', mode: 'initial' as const, assembler: 'invoicing' };
const whenNeeded = { ...initial, mode: 'when_needed' as const };

const row = (over: Partial<SlotCheckRow> = {}): SlotCheckRow => ({ confirmed_flush_lsn: '0/2000', wal_status: 'reserved', system_identifier: SYSTEM, ...over });
const last = (over: Partial<LastCheckpoint> = {}): LastCheckpoint => ({ endLsn: '0/2000', systemId: SYSTEM, slot: 'ea_slot', ...over });

function refusal(run: () => unknown): RebuildNeededError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(RebuildNeededError);
    return error as RebuildNeededError;
  }
  throw new Error('expected a RebuildNeededError, nothing was thrown');
}

describe('resumePoint', () => {
  it('streams from the recorded checkpoint when the slot lags it (the last acknowledgement did not reach PostgreSQL)', () => {
    expect(resumePoint(row({ confirmed_flush_lsn: '0/1000' }), last({ endLsn: '0/2000' }), 'ea_slot', SYSTEM)).toBe('0/2000');
    // As positions, not as text: 0xA000 is past 0x9000 but sorts before '0/9000'.
    expect(resumePoint(row({ confirmed_flush_lsn: '0/9000' }), last({ endLsn: '0/A000' }), 'ea_slot', SYSTEM)).toBe('0/A000');
  });

  it('from the slot when it is at the checkpoint, or when there is no slot position or no checkpoint', () => {
    expect(resumePoint(row({ confirmed_flush_lsn: '0/2000' }), last({ endLsn: '0/2000' }), 'ea_slot', SYSTEM)).toBeNull();
    expect(resumePoint(row({ confirmed_flush_lsn: null }), last(), 'ea_slot', SYSTEM)).toBeNull();
    expect(resumePoint(null, last(), 'ea_slot', SYSTEM)).toBeNull();
    expect(resumePoint(row({ confirmed_flush_lsn: '0/1000' }), null, 'ea_slot', SYSTEM)).toBeNull();
  });

  it("never from a checkpoint of another slot, another system, or one whose system is unknown: skipping by another history's LSNs loses data", () => {
    const lagging = row({ confirmed_flush_lsn: '0/1000' });
    expect(resumePoint(lagging, last({ endLsn: '0/2000', slot: 'other_slot' }), 'ea_slot', SYSTEM)).toBeNull();
    expect(resumePoint(lagging, last({ endLsn: '0/2000', slot: null }), 'ea_slot', SYSTEM)).toBeNull();
    expect(resumePoint(lagging, last({ endLsn: '0/2000' }), 'ea_slot', OTHER_SYSTEM)).toBeNull();
    expect(resumePoint(lagging, last({ endLsn: '0/2000', systemId: null }), 'ea_slot', SYSTEM)).toBeNull();
    expect(resumePoint(lagging, last({ endLsn: '0/2000' }), 'ea_slot', '')).toBeNull();
  });
});

describe('checkSlotAgainstCheckpoint', () => {
  it('gives null when there is no slot (the source\'s own checks name it) or it never confirmed anything', () => {
    expect(checkSlotAgainstCheckpoint(null, last(), initial)).toBeNull();
    expect(checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: null }), last(), initial)).toBeNull();
  });

  it("refuses an invalidated slot (wal_status 'lost') in mode initial", () => {
    const error = refusal(() => checkSlotAgainstCheckpoint(row({ wal_status: 'lost' }), last(), initial));
    expect(error.code).toBe('REBUILD_NEEDED');
    expect(error.message).toContain('"ea_slot" was invalidated');
    expect(error.details).toEqual({ slot: 'ea_slot' });
  });

  it("leaves a lost slot to the snapshot decision in mode when_needed", () => {
    expect(checkSlotAgainstCheckpoint(row({ wal_status: 'lost' }), last(), whenNeeded)).toBeNull();
  });

  it('refuses a slot confirmed ahead of the checkpoint, naming both positions and the checkpoint stream (mode initial)', () => {
    const error = refusal(() => checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/3000' }), last({ endLsn: '0/2000' }), initial));
    expect(error.code).toBe('REBUILD_NEEDED');
    expect(error.message).toContain('confirmed_flush_lsn 0/3000');
    expect(error.message).toContain('0/2000 in event-assembler.checkpoint-invoicing, slot "ea_slot"');
    expect(error.message).toContain('someone else advanced the slot');
    expect(error.details).toEqual({ slot: 'ea_slot', confirmedFlushLsn: '0/3000', checkpointLsn: '0/2000', checkpointStream: 'event-assembler.checkpoint-invoicing' });
  });

  it('compares positions as LSNs, not as text', () => {
    // As text '0/A000' sorts after '0/10000'; as positions 0xA000 is before 0x10000.
    refusal(() => checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/10000' }), last({ endLsn: '0/A000' }), initial));
    expect(checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/A000' }), last({ endLsn: '0/10000' }), initial)).toBe('0/A000');
  });

  it('leaves a slot ahead of the checkpoint to the snapshot decision in mode when_needed', () => {
    expect(checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/3000' }), last(), whenNeeded)).toBeNull();
  });

  it('does not refuse when the checkpoint was recorded on another system (a different database)', () => {
    expect(checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/3000' }), last({ systemId: OTHER_SYSTEM }), initial)).toBe('0/3000');
  });

  it('still compares when either system identifier is unknown', () => {
    refusal(() => checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/3000', system_identifier: '' }), last(), initial));
    refusal(() => checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/3000' }), last({ systemId: null }), initial));
  });

  it('gives the slot\'s position when it is at or behind the checkpoint, or nothing is recorded yet', () => {
    expect(checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/2000' }), last({ endLsn: '0/2000' }), initial)).toBe('0/2000');
    expect(checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/1000' }), last({ endLsn: '0/2000' }), initial)).toBe('0/1000');
    expect(checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/1000' }), last({ endLsn: '0/2000' }), whenNeeded)).toBe('0/1000');
    expect(checkSlotAgainstCheckpoint(row({ confirmed_flush_lsn: '0/5000' }), null, initial)).toBe('0/5000');
  });
});

describe('decideStart', () => {
  const unfinished = newSnapshotProgress({ generation: '4', kind: 'initial', mode: 'initial', tables: ['public.invoice', 'public.payment'], reason: 'r', slot: 'ea_slot', consistentPoint: '0/1000' });
  const running = updateTable(unfinished, 'public.invoice', { status: 'running', lastKey: ['10'] });
  const finished = updateTable(updateTable(unfinished, 'public.invoice', { status: 'done' }), 'public.payment', { status: 'done' });
  const healthy: SlotState = { exists: true, walStatus: 'reserved', confirmedFlushLsn: '0/1000', active: false };
  const lost: SlotState = { exists: true, walStatus: 'lost', confirmedFlushLsn: '0/1000', active: false };
  const input = (over: Partial<StartDecisionInput>): StartDecisionInput => ({ mode: 'initial', storedLsn: null, slot: healthy, slotName: 'ea_slot', progress: null, ...over });

  it('streams when the latest snapshot is finished and its slot is present (mode initial), before anything was recorded', () => {
    const decision = decideStart(input({ progress: finished }));
    expect(decision).toMatchObject({ action: 'stream', mode: 'initial', generation: null, recreateSlot: false, stopAfterSnapshot: false, code: 'SNAPSHOT_DONE' });
    expect(decision.reason).toContain('snapshot generation 4 is complete: streaming from slot ea_slot');
  });

  it('streams over a finished snapshot with a stored position too (mode initial)', () => {
    expect(decideStart(input({ progress: finished, storedLsn: '0/1800' }))).toMatchObject({ action: 'stream', code: 'SNAPSHOT_DONE' });
  });

  it("starts a new generation with a re-created slot in mode when_needed when the slot was lost", () => {
    const decision = decideStart(input({ mode: 'when_needed', progress: finished, slot: lost }));
    expect(decision).toMatchObject({ action: 'new-generation', mode: 'when_needed', generation: '5', recreateSlot: true, code: 'SLOT_LOST' });
    expect(decision.reason).toContain("mode 'when_needed' starts snapshot generation 5 with a new slot");
  });

  it('streams in mode when_needed over a finished snapshot whose slot still serves its consistent point', () => {
    expect(decideStart(input({ mode: 'when_needed', progress: finished }))).toMatchObject({ action: 'stream', mode: 'when_needed', code: 'SNAPSHOT_DONE' });
  });

  it.each<[string, Partial<StartDecisionInput>]>([
    ['nothing stored, no snapshot yet', {}],
    ['an interrupted snapshot', { progress: running }],
    ['a finished snapshot of another slot', { progress: finished, slotName: 'other_slot' }],
    ['a finished snapshot whose slot is gone', { progress: finished, slot: { exists: false, walStatus: null, confirmedFlushLsn: null, active: false } }],
    ['mode never', { mode: 'never', storedLsn: '0/1000' }],
    ['mode initial_only over a finished snapshot', { mode: 'initial_only', progress: finished }],
  ])('otherwise defers to decideSnapshot: %s', (_name, over) => {
    const given = input(over);
    expect(decideStart(given)).toEqual(decideSnapshot({ mode: given.mode, storedLsn: given.storedLsn, slot: given.slot, progress: given.progress, lastGeneration: given.progress?.generation ?? null }));
  });

  it('an interrupted snapshot resumes in its generation (the decision decideSnapshot makes)', () => {
    expect(decideStart(input({ progress: running }))).toMatchObject({ action: 'resume-snapshot', generation: '4', code: 'SNAPSHOT_INTERRUPTED' });
  });

  it('a new generation after a finished one counts on from the progress\' generation', () => {
    // when_needed, position stored and no longer servable: decideSnapshot's new generation, numbered after the last one.
    expect(decideStart(input({ mode: 'when_needed', storedLsn: '0/1800', slot: lost, progress: finished }))).toMatchObject({ action: 'new-generation', generation: '5', code: 'SLOT_LOST' });
  });
});
