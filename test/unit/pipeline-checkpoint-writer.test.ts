// The checkpoint writer: record the durable prefix in the checkpoint stream, then — and only then — acknowledge it to the slot.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRedactor } from '../../src/config/redact.js';
import { CHECKPOINT_MIN_INTERVAL_MS, checkpointEvent, createCheckpointWriter, type CheckpointTarget } from '../../src/pipeline/checkpoint-writer.js';
import { silentLogger } from '../../src/pipeline/logger.js';
import { createRunControl, type RunControl } from '../../src/pipeline/run-control.js';
import type { AppendOutcome, KurrentDBSink, SinkBatch } from '../../src/sink/index.js';
import type { SourceStatus } from '../../src/source/index.js';
import type { Lsn } from '../../src/source/types.js';

const SYSTEM_ID = '7000000000000000001';
const OUTCOME: AppendOutcome = { appended: 1, skipped: 0, streams: [], checkpoint: 'none', mode: 'multi-stream' };

function target(endLsn: Lsn, xid = 1): CheckpointTarget {
  return { tx: null, commitLsn: endLsn, xid, checkpoint: `test:${endLsn}:${xid}`, systemId: SYSTEM_ID, endLsn };
}

/** A sink whose appends the test settles one by one. */
function fakeSink() {
  const calls: { batch: SinkBatch; resolve: () => void; reject: (error: unknown) => void }[] = [];
  const sink: KurrentDBSink = {
    mode: 'multi-stream',
    append(batch) {
      return new Promise<AppendOutcome>((resolve, reject) => calls.push({ batch, resolve: () => resolve(OUTCOME), reject }));
    },
    appendMany: () => Promise.reject(new Error('not used by the checkpoint writer')),
    status: () => {
      throw new Error('not used by the checkpoint writer');
    },
    close: () => Promise.resolve(),
  };
  const endLsns = (): unknown[] => calls.map((c) => (c.batch.events[0]!.data as { position: { endLsn: string } }).position.endLsn);
  return { sink, calls, endLsns };
}

const IDLE_STATUS: SourceStatus = {
  state: 'streaming',
  receivedLsn: '0/900',
  durableLsn: '0/100',
  inFlightTransactions: 0,
  inFlightBytes: 0,
  openTransactions: 0,
  pendingMessages: 0,
  paused: false,
  reconnects: 0,
  bufferMemoryBytes: 0,
  spilledBytes: 0,
  spilledTransactions: 0,
  systemId: SYSTEM_ID,
  timeline: 1,
  lastError: null,
};

function fakeSource(status: Partial<SourceStatus> = {}) {
  const acknowledged: Lsn[] = [];
  let current: SourceStatus = { ...IDLE_STATUS, ...status };
  return {
    acknowledged,
    set(next: Partial<SourceStatus>) {
      current = { ...current, ...next };
    },
    source: {
      acknowledge(t: { endLsn: Lsn } | Lsn) {
        acknowledged.push(typeof t === 'string' ? t : t.endLsn);
      },
      status: () => current,
    },
  };
}

/** Lets every settled promise's reactions run (no timers involved). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** `minIntervalMs` defaults to 0 here: the tests outside "the interval between records" are about order, not pace. */
function rig(options: { sink?: boolean; pending?: number; status?: Partial<SourceStatus>; minIntervalMs?: number } = {}) {
  const sink = fakeSink();
  const source = fakeSource(options.status);
  const control: RunControl = createRunControl(silentLogger, createRedactor());
  let pending = options.pending ?? 0;
  const writer = createCheckpointWriter({
    assembler: 'invoicing',
    slot: 'ea_slot',
    control,
    sink: () => (options.sink === false ? null : sink.sink),
    source: () => source.source,
    pending: () => pending,
    minIntervalMs: options.minIntervalMs ?? 0,
  });
  return { sink, source, control, writer, setPending: (n: number) => void (pending = n) };
}

describe('checkpoint writer: advance', () => {
  it('writes one checkpoint record and acknowledges only after the write resolved', async () => {
    const { sink, source, writer } = rig();
    writer.advance(target('0/200'));
    expect(sink.calls).toHaveLength(1);
    expect(sink.calls[0]!.batch).toEqual(checkpointEvent('invoicing', 'ea_slot', target('0/200'), false));
    await settle();
    expect(source.acknowledged).toEqual([]);
    expect(writer.recordedLsn).toBeNull();

    sink.calls[0]!.resolve();
    await settle();
    expect(source.acknowledged).toEqual(['0/200']);
    expect(writer.recordedLsn).toBe('0/200');
    expect(writer.acknowledgedLsn).toBe('0/200');
    expect(sink.calls).toHaveLength(1);
  });

  it('while a write is in flight, a newer target replaces older ones: only the newest is written next', async () => {
    const { sink, source, writer } = rig();
    writer.advance(target('0/100'));
    writer.advance(target('0/200'));
    writer.advance(target('0/300'));
    expect(sink.endLsns()).toEqual(['0/100']);

    sink.calls[0]!.resolve();
    await settle();
    expect(source.acknowledged).toEqual(['0/100']);
    expect(sink.endLsns()).toEqual(['0/100', '0/300']);

    sink.calls[1]!.resolve();
    await writer.flush();
    expect(source.acknowledged).toEqual(['0/100', '0/300']);
    expect(writer.recordedLsn).toBe('0/300');
  });

  it('acknowledges a target at or below the recorded position without writing it again', () => {
    const { sink, source, writer } = rig();
    writer.recordedLsn = '0/500'; // read back from the checkpoint stream at start-up
    writer.advance(target('0/400'));
    writer.advance(target('0/500'));
    expect(sink.calls).toEqual([]);
    expect(source.acknowledged).toEqual(['0/400', '0/500']);
    expect(writer.recordedLsn).toBe('0/500');
  });

  it('without a checkpoint sink (a custom sink) acknowledges directly, recording nothing', () => {
    const { source, writer } = rig({ sink: false });
    writer.advance(target('0/200'));
    expect(source.acknowledged).toEqual(['0/200']);
    expect(writer.acknowledgedLsn).toBe('0/200');
    expect(writer.recordedLsn).toBeNull();
  });

  it('a failing write fails the run and acknowledges nothing', async () => {
    const { sink, source, writer, control } = rig();
    writer.advance(target('0/200'));
    const error = new Error('checkpoint stream: access denied');
    sink.calls[0]!.reject(error);
    await settle();
    expect(control.fatal).toBe(error);
    expect(control.stopRequested).toBe(true);
    expect(source.acknowledged).toEqual([]);
    expect(writer.recordedLsn).toBeNull();
    expect(writer.acknowledgedLsn).toBeNull();
  });

  it('after abandon() nothing is acknowledged, even once the write lands', async () => {
    const { sink, source, writer, control } = rig();
    writer.advance(target('0/200'));
    control.abandon();
    sink.calls[0]!.resolve();
    await settle();
    expect(source.acknowledged).toEqual([]);
    expect(writer.acknowledgedLsn).toBeNull();
    writer.advance(target('0/100')); // below what is recorded: would be acknowledged without a write
    expect(source.acknowledged).toEqual([]);
  });

  it('flush() resolves once the newest target is recorded and acknowledged', async () => {
    const { sink, source, writer } = rig();
    writer.advance(target('0/100'));
    writer.advance(target('0/200'));
    let flushed = false;
    const flushing = writer.flush().then(() => (flushed = true));
    sink.calls[0]!.resolve();
    await settle();
    expect(flushed).toBe(false); // 0/200 is being written now
    sink.calls[1]!.resolve();
    await flushing;
    expect(source.acknowledged).toEqual(['0/100', '0/200']);
  });
});

describe('checkpoint writer: idle()', () => {
  it('records the received keepalive position while nothing is in flight, without acknowledging it', async () => {
    const { sink, source, writer } = rig({ status: { receivedLsn: '0/900' } });
    writer.recordedLsn = '0/300';
    const idle = writer.idle();
    expect(sink.calls).toHaveLength(1);
    const event = sink.calls[0]!.batch.events[0]!;
    expect(event.data).toMatchObject({ assembler: 'invoicing', position: { endLsn: '0/900', commitLsn: '0/900', xid: 0, slot: 'ea_slot', systemId: SYSTEM_ID, idle: true } });
    sink.calls[0]!.resolve();
    await idle;
    expect(writer.recordedLsn).toBe('0/900');
    expect(source.acknowledged).toEqual([]); // the source acknowledges idle positions itself (idleAcknowledgeLimit)
    await writer.idle(); // nothing new received: nothing to write
    expect(sink.calls).toHaveLength(1);
  });

  it.each<[string, { pending?: number; status?: Partial<SourceStatus>; recorded?: Lsn; sink?: boolean }]>([
    ['transactions registered and not yet durable', { pending: 1 }],
    ['transactions handed out by the source and unacknowledged', { status: { inFlightTransactions: 2 } }],
    ['a transaction open at the source', { status: { openTransactions: 1 } }],
    ["a message received and not yet taken in (a spilled transaction's commit being finished)", { status: { pendingMessages: 1 } }],
    ['nothing received yet', { status: { receivedLsn: '0/0' } }],
    ['the received position already recorded', { recorded: '0/900' }],
    ['the received position below the recorded one', { recorded: '0/A00' }],
    ['no system identity yet', { status: { systemId: null } }],
    ['no timeline yet', { status: { timeline: null } }],
    ['no checkpoint sink', { sink: false }],
  ])('writes nothing with %s', async (_name, given) => {
    const { sink, writer } = rig({ ...(given.pending !== undefined ? { pending: given.pending } : {}), ...(given.status ? { status: given.status } : {}), ...(given.sink === false ? { sink: false } : {}) });
    if (given.recorded) writer.recordedLsn = given.recorded;
    await writer.idle();
    expect(sink.calls).toEqual([]);
  });

  it('writes nothing while a checkpoint write is in flight, nor after a stop was requested', async () => {
    const { sink, writer, control } = rig();
    writer.advance(target('0/100'));
    await writer.idle();
    expect(sink.endLsns()).toEqual(['0/100']);
    sink.calls[0]!.resolve();
    await writer.flush();
    control.requestStop();
    await writer.idle();
    expect(sink.endLsns()).toEqual(['0/100']);
  });

  it('an advance during an idle write is written after it', async () => {
    const { sink, source, writer } = rig({ status: { receivedLsn: '0/900' } });
    const idle = writer.idle();
    writer.advance(target('0/A00'));
    expect(sink.endLsns()).toEqual(['0/900']);
    sink.calls[0]!.resolve();
    await idle;
    await settle();
    expect(sink.endLsns()).toEqual(['0/900', '0/A00']);
    sink.calls[1]!.resolve();
    await writer.flush();
    expect(source.acknowledged).toEqual(['0/A00']);
  });
});

describe('checkpoint writer: recordConsistentPoint()', () => {
  it('records a complete initial snapshot\'s consistent point (not acknowledged), asking the timeline only when it writes', async () => {
    const { sink, source, writer } = rig();
    let asked = 0;
    const timeline = (): Promise<number> => Promise.resolve((asked += 1, 3));
    const recording = writer.recordConsistentPoint('0/700', SYSTEM_ID, timeline);
    await settle();
    expect(sink.endLsns()).toEqual(['0/700']);
    sink.calls[0]!.resolve();
    await recording;
    expect(writer.recordedLsn).toBe('0/700');
    expect(source.acknowledged).toEqual([]);
    await writer.recordConsistentPoint('0/600', SYSTEM_ID, timeline);
    expect(sink.calls).toHaveLength(1);
    expect(asked).toBe(1);
  });
});

describe('checkpointEvent', () => {
  it('has a deterministic id: the same input gives the same id, another end LSN another id', () => {
    const a = checkpointEvent('invoicing', 'ea_slot', target('0/200'), false).events[0]!;
    const again = checkpointEvent('invoicing', 'ea_slot', target('0/200'), false).events[0]!;
    const later = checkpointEvent('invoicing', 'ea_slot', target('0/201'), false).events[0]!;
    const otherAssembler = checkpointEvent('billing', 'ea_slot', target('0/200'), false).events[0]!;
    expect(a.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(again.id).toBe(a.id);
    expect(later.id).not.toBe(a.id);
    expect(otherAssembler.id).not.toBe(a.id);
  });

  it('names the checkpoint stream, the position and the slot', () => {
    const record = checkpointEvent('invoicing', 'ea_slot', target('0/200', 744), true);
    expect(record.position).toEqual({ kind: 'transaction', checkpoint: 'test:0/200:744', commitLsn: '0/200', xid: 744, systemId: SYSTEM_ID });
    expect(record.events).toHaveLength(1);
    expect(record.events[0]).toMatchObject({
      stream: 'event-assembler.checkpoint-invoicing',
      type: 'CheckpointRecorded',
      data: { assembler: 'invoicing', position: { kind: 'transaction', checkpoint: 'test:0/200:744', commitLsn: '0/200', xid: 744, systemId: SYSTEM_ID, endLsn: '0/200', slot: 'ea_slot', idle: true } },
      metadata: { contract: 'CheckpointRecorded@1', 'source.checkpoint': 'test:0/200:744', 'source.endLsn': '0/200' },
    });
    expect(checkpointEvent('invoicing', 'ea_slot', target('0/200'), false).events[0]!.data).not.toHaveProperty('position.idle');
  });

  it("records the source's timeline from a v1 checkpoint (it changes when a standby is promoted), and none from another form", () => {
    const checkpoint = `v1:${SYSTEM_ID}:2:ea_slot:0/3000000:745`;
    const record = checkpointEvent('invoicing', 'ea_slot', { ...target('0/3000000', 745), checkpoint }, false);
    expect(record.events[0]!.data).toMatchObject({ position: { checkpoint, timeline: 2, endLsn: '0/3000000' } });
    // The id does not depend on the timeline: a checkpoint re-written on the new timeline is the same record.
    expect(record.events[0]!.id).toBe(checkpointEvent('invoicing', 'ea_slot', { ...target('0/3000000', 745), checkpoint: checkpoint.replace(':2:', ':1:') }, false).events[0]!.id);
    expect(checkpointEvent('invoicing', 'ea_slot', target('0/200'), false).events[0]!.data).not.toHaveProperty('position.timeline');
  });
});

describe('checkpoint writer: the interval between records', () => {
  afterEach(() => vi.useRealTimers());
  const fake = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });

  /** A writer with the interval whose first record (0/100) is written and acknowledged. */
  const afterFirstRecord = async () => {
    const r = rig({ minIntervalMs: 50 });
    r.writer.advance(target('0/100'));
    r.sink.calls[0]!.resolve();
    await settle();
    return r;
  };

  it('starts at most one record per interval: targets that arrive within it wait, and only the newest is written', async () => {
    fake();
    const { sink, source, writer } = await afterFirstRecord();
    expect(source.acknowledged).toEqual(['0/100']);

    writer.advance(target('0/200'));
    writer.advance(target('0/300'));
    vi.advanceTimersByTime(49);
    expect(sink.endLsns()).toEqual(['0/100']);
    expect(source.acknowledged).toEqual(['0/100']); // nothing is acknowledged before it is recorded
    vi.advanceTimersByTime(1);
    expect(sink.endLsns()).toEqual(['0/100', '0/300']);

    sink.calls[1]!.resolve();
    await settle();
    expect(source.acknowledged).toEqual(['0/100', '0/300']);
    expect(writer.recordedLsn).toBe('0/300');
  });

  it('a record that took the interval or longer is followed at once', async () => {
    fake();
    const { sink, writer } = rig({ minIntervalMs: 50 });
    writer.advance(target('0/100'));
    writer.advance(target('0/200')); // while the first is in flight
    vi.advanceTimersByTime(50);
    sink.calls[0]!.resolve();
    await settle();
    expect(sink.endLsns()).toEqual(['0/100', '0/200']);
  });

  it('flush() writes a waiting target at once, and an idle checkpoint does not write past it meanwhile', async () => {
    fake();
    const { sink, source, writer } = await afterFirstRecord();
    writer.advance(target('0/200'));

    await writer.idle(); // the source reports 0/900 received and nothing in flight: still not written
    expect(sink.endLsns()).toEqual(['0/100']);

    const flushed = writer.flush();
    expect(sink.endLsns()).toEqual(['0/100', '0/200']);
    sink.calls[1]!.resolve();
    await flushed;
    expect(source.acknowledged).toEqual(['0/100', '0/200']);
    vi.advanceTimersByTime(1_000);
    expect(sink.calls).toHaveLength(2); // the cleared timer writes nothing later
  });

  it('defaults to 50 ms', async () => {
    fake();
    const sink = fakeSink();
    const source = fakeSource();
    const writer = createCheckpointWriter({ assembler: 'invoicing', slot: 'ea_slot', control: createRunControl(silentLogger, createRedactor()), sink: () => sink.sink, source: () => source.source, pending: () => 0 });
    writer.advance(target('0/100'));
    sink.calls[0]!.resolve();
    await settle();
    writer.advance(target('0/200'));
    vi.advanceTimersByTime(CHECKPOINT_MIN_INTERVAL_MS - 1);
    expect(sink.endLsns()).toEqual(['0/100']);
    vi.advanceTimersByTime(1);
    expect(sink.endLsns()).toEqual(['0/100', '0/200']);
    expect(CHECKPOINT_MIN_INTERVAL_MS).toBe(50);
  });
});
