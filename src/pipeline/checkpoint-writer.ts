/**
 * The checkpoint writer: what the slot may forget, and when.
 *
 * The coordinator (checkpoint-coordinator.ts) says how far the contiguous durable prefix reaches;
 * this writes that position to the checkpoint stream (`event-assembler.checkpoint-<name>`) and
 * only then acknowledges it to the slot — so the slot's confirmed_flush_lsn is never ahead of the
 * destination's record, which is what the start-up check relies on (DESIGN invariant 7). One
 * write at a time, and at most one every `minIntervalMs` (50 ms): meanwhile the newest target
 * replaces the older. Without the interval a trickle of transactions cost a checkpoint record
 * each — as many appends again as the transactions' own, at 1,000 tx/s ≈ 17 % of the server's
 * CPU and 8–18 % of the assembler's — while the slot gains nothing from being told sooner.
 * `flush()` (a stop) writes at once. While nothing is in flight or waiting, the received
 * keepalive position is recorded too (an idle checkpoint), so the source may acknowledge it and
 * the slot does not hold WAL for tables nobody writes.
 */
import { EVENT_ASSEMBLER_NAMESPACE, uuidv5 } from '../mapping/index.js';
import { CHECKPOINT_EVENT_TYPE, checkpointStreamName, type KurrentDBSink, type SinkEvent, type SinkPosition } from '../sink/index.js';
import { isSourceIdle, type PostgresSource } from '../source/index.js';
import { compareLsn, decodeCheckpoint, makeSourcePosition } from '../source/position.js';
import type { Lsn } from '../source/types.js';
import type { RunControl } from './run-control.js';
import type { TxPayload } from './types.js';

export type CheckpointTarget = TxPayload & { readonly endLsn: Lsn };

export interface CheckpointWriterDeps {
  readonly assembler: string;
  readonly slot: string;
  readonly control: RunControl;
  /** The checkpoint stream's writer; `null` with a custom sink (then positions are acknowledged unrecorded). */
  sink(): KurrentDBSink | null;
  source(): Pick<PostgresSource, 'acknowledge' | 'status'> | null;
  /** Transactions registered and not yet durable (an idle checkpoint waits for none). */
  pending(): number;
  /** Least time between the starts of two checkpoint records (`flush` does not wait). @default 50 */
  readonly minIntervalMs?: number;
}

/** Least time between two checkpoint records of a running pipeline (see the module comment). */
export const CHECKPOINT_MIN_INTERVAL_MS = 50;

export interface CheckpointWriter {
  /** The durable prefix advanced to `target`: record it, then acknowledge it. */
  advance(target: CheckpointTarget): void;
  /** Resolves once no write is in flight and the newest target is recorded and acknowledged. */
  flush(): Promise<void>;
  /** Records the received keepalive position while nothing is in flight (the idle timer's tick). */
  idle(): Promise<void>;
  /** Records a complete initial snapshot's consistent point (not acknowledged); `timeline` is asked only when it is written. */
  recordConsistentPoint(lsn: Lsn, systemId: string, timeline: () => Promise<number>): Promise<void>;
  /** Highest position in the checkpoint stream: the slot is never acknowledged beyond it. */
  recordedLsn: Lsn | null;
  /** Last position acknowledged to the slot. */
  readonly acknowledgedLsn: Lsn | null;
  /** Epoch milliseconds when the last checkpoint record became durable (`null`: none by this run). */
  readonly recordedAt: number | null;
}

function timelineOf(checkpoint: string): number | null {
  try {
    return decodeCheckpoint(checkpoint).timeline;
  } catch {
    return null; // not a v1 checkpoint string (a custom position): no timeline to record
  }
}

/** The checkpoint record for `target` (its id is deterministic: a replayed write is recognised). */
export function checkpointEvent(assembler: string, slot: string, target: CheckpointTarget, idle: boolean): { position: SinkPosition; events: SinkEvent[] } {
  const position = { kind: 'transaction' as const, checkpoint: target.checkpoint, commitLsn: target.commitLsn, xid: target.xid, systemId: target.systemId };
  // The source's timeline (it changes when a standby is promoted): in the checkpoint string, and spelled out for readers.
  const timeline = timelineOf(target.checkpoint);
  return {
    position,
    events: [
      {
        id: uuidv5(JSON.stringify(['pipeline-checkpoint', assembler, target.systemId, target.endLsn]), EVENT_ASSEMBLER_NAMESPACE),
        stream: checkpointStreamName(assembler),
        type: CHECKPOINT_EVENT_TYPE,
        data: { assembler, position: { ...position, endLsn: target.endLsn, slot, ...(timeline !== null ? { timeline } : {}), ...(idle ? { idle: true } : {}) } },
        metadata: { contract: `${CHECKPOINT_EVENT_TYPE}@1`, 'source.checkpoint': target.checkpoint, 'source.endLsn': target.endLsn },
      },
    ],
  };
}

export function createCheckpointWriter(deps: CheckpointWriterDeps): CheckpointWriter {
  let recordedLsn: Lsn | null = null;
  let recordedAt: number | null = null;
  let acknowledgedLsn: Lsn | null = null;
  let target: CheckpointTarget | null = null;
  let writing: Promise<void> | null = null;
  const minInterval = deps.minIntervalMs ?? CHECKPOINT_MIN_INTERVAL_MS;
  /** When the last record was started (`performance.now()`), and the timer that waits out the interval. */
  let lastWriteAt = -Infinity;
  let waiting: ReturnType<typeof setTimeout> | null = null;
  let flushing = false;

  const isRecorded = (lsn: Lsn): boolean => recordedLsn !== null && compareLsn(lsn, recordedLsn) <= 0;
  const recorded = (lsn: Lsn): void => {
    recordedAt = Date.now();
    if (!isRecorded(lsn)) recordedLsn = lsn;
  };

  function acknowledge(endLsn: Lsn): void {
    const source = deps.source();
    // After the drain deadline the source is closing: what is acknowledged stays where it was.
    if (!source || deps.control.abandoned) return;
    source.acknowledge(endLsn);
    acknowledgedLsn = endLsn;
  }

  /** One write at a time: when it ends (either way) the next target, if any, is written. */
  function write(record: { position: SinkPosition; events: SinkEvent[] }, onDurable: () => void): Promise<void> {
    const promise: Promise<void> = deps
      .sink()!
      .append(record)
      .then(onDurable, (error: unknown) => deps.control.fail(error))
      .finally(() => {
        // Runs in a later microtask, so `writing` is already this promise.
        if (writing === promise) writing = null;
        pump();
      });
    writing = promise;
    return promise;
  }

  function pump(): void {
    if (writing || !target || waiting) return;
    const wait = flushing ? 0 : lastWriteAt + minInterval - performance.now();
    if (wait > 0) {
      waiting = setTimeout(() => {
        waiting = null;
        pump();
      }, wait);
      return;
    }
    const next = target;
    target = null;
    if (!deps.sink() || isRecorded(next.endLsn)) {
      // Nothing to record (a custom sink, or a replay below what is recorded already).
      acknowledge(next.endLsn);
      return;
    }
    lastWriteAt = performance.now();
    void write(checkpointEvent(deps.assembler, deps.slot, next, false), () => {
      recorded(next.endLsn);
      acknowledge(next.endLsn);
    });
  }

  return {
    advance(next) {
      target = next;
      pump();
    },
    async flush() {
      flushing = true;
      if (waiting) clearTimeout(waiting);
      waiting = null;
      try {
        for (;;) {
          pump();
          const current = writing;
          if (!current) return;
          await current;
        }
      } finally {
        flushing = false;
      }
    },
    async idle() {
      const source = deps.source();
      if (!source || !deps.sink() || writing || waiting || deps.pending() > 0 || deps.control.stopRequested) return;
      const s = source.status();
      // The source's own test: a spilled transaction's commit is received (`receivedLsn` past it)
      // before it is taken in, only pending then. Recorded then, a crash before it was durable would restart past it.
      if (!isSourceIdle(s) || !s.systemId || s.timeline === null) return;
      const received = s.receivedLsn;
      if (received === '0/0' || isRecorded(received)) return;
      const position = makeSourcePosition({ systemId: s.systemId, timeline: s.timeline, slot: deps.slot, commitLsn: received, xid: 0 });
      const idleTarget = { tx: null, commitLsn: received, xid: 0, checkpoint: position.checkpoint, systemId: s.systemId, endLsn: received };
      await write(checkpointEvent(deps.assembler, deps.slot, idleTarget, true), () => recorded(received));
    },
    async recordConsistentPoint(lsn, systemId, timeline) {
      const sink = deps.sink();
      if (!sink || isRecorded(lsn)) return;
      const position = makeSourcePosition({ systemId, timeline: await timeline(), slot: deps.slot, commitLsn: lsn, xid: 0 });
      await sink.append(checkpointEvent(deps.assembler, deps.slot, { tx: null, commitLsn: lsn, xid: 0, checkpoint: position.checkpoint, systemId, endLsn: lsn }, true));
      recordedLsn = lsn;
      recordedAt = Date.now();
    },
    get recordedLsn() {
      return recordedLsn;
    },
    set recordedLsn(lsn) {
      recordedLsn = lsn;
    },
    get acknowledgedLsn() {
      return acknowledgedLsn;
    },
    get recordedAt() {
      return recordedAt;
    },
  };
}
