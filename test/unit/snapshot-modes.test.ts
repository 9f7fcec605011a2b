// Snapshot modes as a decision table: given mode, stored position, slot state and progress → action and why.
import { describe, expect, it } from 'vitest';
import { decideSnapshot, newSnapshotProgress, nextGeneration, updateTable, type SnapshotDecisionInput } from '../../src/source/snapshot/index.js';

const healthy = { exists: true, walStatus: 'reserved', confirmedFlushLsn: '0/1000' };
const unfinished = updateTable(newSnapshotProgress({ generation: '4', kind: 'initial', mode: 'initial', tables: ['public.a', 'public.b'], reason: 'r', slot: 's', consistentPoint: '0/1000' }), 'public.a', { status: 'running', lastKey: ['10'] });
const finished = updateTable(updateTable(unfinished, 'public.a', { status: 'done' }), 'public.b', { status: 'done' });
const input = (over: Partial<SnapshotDecisionInput>): SnapshotDecisionInput => ({ mode: 'initial', storedLsn: null, slot: { exists: false }, progress: null, lastGeneration: null, ...over });

describe('decideSnapshot', () => {
  it.each([
    ['initial, nothing stored, no slot', input({}), { action: 'initial-snapshot', generation: '1', recreateSlot: false, stopAfterSnapshot: false, code: 'NO_STORED_POSITION' }],
    ['initial, nothing stored, slot made by setup (no snapshot left)', input({ slot: healthy }), { action: 'initial-snapshot', generation: '1', recreateSlot: true, code: 'NO_STORED_POSITION_SLOT_EXISTS' }],
    ['initial, position servable', input({ storedLsn: '0/2000', slot: healthy }), { action: 'stream', generation: null, code: 'POSITION_SERVABLE' }],
    ['initial, slot lost', input({ storedLsn: '0/2000', slot: { exists: true, walStatus: 'lost' }, lastGeneration: '2' }), { action: 'refuse', generation: null, code: 'SLOT_LOST' }],
    ['initial, slot missing', input({ storedLsn: '0/2000', slot: { exists: false } }), { action: 'refuse', code: 'SLOT_MISSING' }],
    ['initial, slot confirmed past the stored position', input({ storedLsn: '0/F00', slot: healthy }), { action: 'refuse', code: 'POSITION_BEHIND_SLOT' }],
    ['never, nothing stored', input({ mode: 'never', slot: healthy }), { action: 'stream', code: 'NO_STORED_POSITION_NO_SNAPSHOT' }],
    ['never, slot lost', input({ mode: 'never', storedLsn: '0/2000', slot: { exists: true, walStatus: 'lost' } }), { action: 'refuse', code: 'SLOT_LOST' }],
    ['when_needed, slot lost → new generation', input({ mode: 'when_needed', storedLsn: '0/2000', slot: { exists: true, walStatus: 'lost' }, lastGeneration: '2' }), { action: 'new-generation', generation: '3', recreateSlot: true, code: 'SLOT_LOST' }],
    ['when_needed, slot missing → new generation', input({ mode: 'when_needed', storedLsn: '0/2000', lastGeneration: '2' }), { action: 'new-generation', generation: '3', recreateSlot: false, code: 'SLOT_MISSING' }],
    ['when_needed, servable', input({ mode: 'when_needed', storedLsn: '0/1000', slot: healthy }), { action: 'stream', code: 'POSITION_SERVABLE' }],
    ['initial_only, nothing stored', input({ mode: 'initial_only' }), { action: 'initial-snapshot', stopAfterSnapshot: true }],
    ['initial_only, snapshot finished', input({ mode: 'initial_only', progress: finished, lastGeneration: '4' }), { action: 'stop', code: 'SNAPSHOT_DONE' }],
    ['interrupted initial snapshot, slot alive → resume same generation', input({ slot: healthy, progress: unfinished, lastGeneration: '4' }), { action: 'resume-snapshot', generation: '4', code: 'SNAPSHOT_INTERRUPTED' }],
    ['interrupted, slot gone, mode initial → refuse (never re-snapshots on its own)', input({ progress: unfinished, lastGeneration: '4' }), { action: 'refuse', generation: null, code: 'SNAPSHOT_INTERRUPTED_SLOT_GONE' }],
    ['interrupted, slot gone, when_needed → new generation', input({ mode: 'when_needed', progress: unfinished, lastGeneration: '4' }), { action: 'new-generation', generation: '5', recreateSlot: false, code: 'SNAPSHOT_INTERRUPTED_SLOT_GONE' }],
    ['interrupted, slot advanced past the consistent point, when_needed → new generation', input({ mode: 'when_needed', slot: { exists: true, walStatus: 'reserved', confirmedFlushLsn: '0/1800' }, progress: unfinished, lastGeneration: '4' }), { action: 'new-generation', generation: '5', recreateSlot: true, code: 'POSITION_BEHIND_SLOT' }],
    ['interrupted, slot advanced past the consistent point, initial → refuse', input({ slot: { exists: true, walStatus: 'reserved', confirmedFlushLsn: '0/1800' }, progress: unfinished }), { action: 'refuse', code: 'POSITION_BEHIND_SLOT' }],
    ['new generation interrupted before anything streamed: the checkpoint still names the old slot, the new slot sits at the consistent point → resume', input({ mode: 'when_needed', storedLsn: '0/800', slot: { exists: true, walStatus: 'reserved', confirmedFlushLsn: '0/1000' }, progress: unfinished }), { action: 'resume-snapshot', generation: '4' }],
    ['new generation finished before anything streamed → stream from the new slot', input({ mode: 'when_needed', storedLsn: '0/800', slot: { exists: true, walStatus: 'reserved', confirmedFlushLsn: '0/1000' }, progress: finished }), { action: 'stream', code: 'POSITION_SERVABLE' }],
    ['interrupted, resumed part streamed: slot at the stored position → resume', input({ storedLsn: '0/1800', slot: { exists: true, walStatus: 'reserved', confirmedFlushLsn: '0/1800' }, progress: unfinished }), { action: 'resume-snapshot', generation: '4' }],
    ['interrupted, slot lost, initial with stored position → refuse', input({ storedLsn: '0/2000', slot: { exists: true, walStatus: 'lost' }, progress: unfinished, lastGeneration: '4' }), { action: 'refuse', code: 'SLOT_LOST' }],
  ])('%s', (_name, given, expected) => {
    const decision = decideSnapshot(given);
    expect(decision).toMatchObject(expected);
    expect(decision.reason.length).toBeGreaterThan(20);
  });

  it('says why in words an operator can act on', () => {
    const d = decideSnapshot(input({ mode: 'when_needed', storedLsn: '0/2000', slot: { exists: true, walStatus: 'lost' }, lastGeneration: '2' }));
    expect(d.reason).toContain("wal_status = 'lost'");
    expect(d.reason).toContain('generation 3');
    const refused = decideSnapshot(input({ storedLsn: '0/2000', slot: { exists: true, walStatus: 'lost' } }));
    expect(refused.reason).toContain("mode 'when_needed'");
  });

  it('numbers generations upwards and never reuses one', () => {
    expect(nextGeneration(null)).toBe('1');
    expect(nextGeneration('9')).toBe('10');
    expect(nextGeneration('99999999999999999999')).toBe('100000000000000000000');
    expect(nextGeneration('2024-rebuild')).toBe('2024-rebuild.1');
  });
});
