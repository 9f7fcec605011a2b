/**
 * The checkpoint coordinator: which source position may be acknowledged to PostgreSQL.
 *
 * Transactions are registered in the order the source hands them out (ascending end LSN) and
 * completed in any order — appends to different streams finish out of order. The acknowledgeable
 * position is the end LSN of the last transaction of the *contiguous* completed prefix: that
 * transaction and every earlier one are durable (appended, parked, or had nothing to append).
 * A transaction that failed holds the prefix back for good (DESIGN invariant 2); like
 * Debezium's two positions, "received" and "processed" are tracked separately.
 *
 * Pure: no I/O, no timers.
 */
import { compareLsn } from '../source/position.js';
import type { Lsn } from '../source/types.js';

export interface CoordinatedPosition<P> {
  readonly seq: number;
  readonly endLsn: Lsn;
  readonly payload: P;
}

export interface CheckpointCoordinator<P = unknown> {
  /** Registers the next transaction; its end LSN must be above every earlier one. Returns its sequence number. */
  received(endLsn: Lsn, payload: P): number;
  /** Marks a transaction durable. Returns the new acknowledgeable position when the prefix advanced, else `null`. */
  complete(seq: number): CoordinatedPosition<P> | null;
  /** Marks a transaction failed: nothing at or after it ever becomes acknowledgeable. */
  fail(seq: number): void;
  /** The end of the contiguous durable prefix (`null` before the first). */
  readonly acknowledgeable: CoordinatedPosition<P> | null;
  /** The last registered transaction's end LSN (`null` before the first). */
  readonly receivedLsn: Lsn | null;
  /** Registered and not yet part of the durable prefix (completed out of order included). */
  readonly pending: number;
  /** The oldest registered transaction not yet in the durable prefix (`null`: none). */
  readonly firstPending: CoordinatedPosition<P> | null;
  /** True once a transaction failed. */
  readonly halted: boolean;
}

interface Entry<P> {
  readonly seq: number;
  readonly endLsn: Lsn;
  readonly payload: P;
  state: 'pending' | 'done' | 'failed';
}

export function createCheckpointCoordinator<P = unknown>(): CheckpointCoordinator<P> {
  // Entries from the first not-yet-acknowledgeable one on; a head index keeps shifts O(1).
  let entries: Entry<P>[] = [];
  let head = 0;
  let nextSeq = 0;
  let firstSeq = 0; // seq of entries[head]
  let last: CoordinatedPosition<P> | null = null;
  let receivedLsn: Lsn | null = null;
  let halted = false;

  function at(seq: number): Entry<P> {
    const entry = entries[head + (seq - firstSeq)];
    if (seq < firstSeq || !entry || entry.seq !== seq) throw new RangeError(`unknown or already acknowledged transaction #${seq}`);
    return entry;
  }

  return {
    received(endLsn, payload) {
      if (receivedLsn !== null && compareLsn(endLsn, receivedLsn) <= 0) {
        throw new RangeError(`transactions must be registered in ascending end LSN order: ${endLsn} after ${receivedLsn}`);
      }
      receivedLsn = endLsn;
      const seq = nextSeq++;
      entries.push({ seq, endLsn, payload, state: 'pending' });
      return seq;
    },
    complete(seq) {
      const entry = at(seq);
      if (entry.state === 'failed') throw new RangeError(`transaction #${seq} already failed`);
      entry.state = 'done';
      // A failed entry is never 'done': the prefix stops right before it.
      let advanced: Entry<P> | null = null;
      while (head < entries.length && entries[head]!.state === 'done') {
        advanced = entries[head]!;
        head += 1;
        firstSeq += 1;
      }
      if (head > 1024 && head * 2 > entries.length) {
        entries = entries.slice(head);
        head = 0;
      }
      if (!advanced) return null;
      last = { seq: advanced.seq, endLsn: advanced.endLsn, payload: advanced.payload };
      return last;
    },
    fail(seq) {
      at(seq).state = 'failed';
      halted = true;
    },
    get acknowledgeable() {
      return last;
    },
    get receivedLsn() {
      return receivedLsn;
    },
    get pending() {
      return entries.length - head;
    },
    get firstPending() {
      const entry = entries[head];
      return entry ? { seq: entry.seq, endLsn: entry.endLsn, payload: entry.payload } : null;
    },
    get halted() {
      return halted;
    },
  };
}
