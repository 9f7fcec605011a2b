/**
 * The source's transaction intake: decoded pgoutput messages in (through the transaction
 * buffer), complete transactions queued for the consumer, and the in-flight list of what was
 * taken in and not yet acknowledged (count and pgoutput bytes, for backpressure).
 *
 * Within one source each transaction is taken in once: after a reconnect the server re-sends
 * from the durable position, so a transaction ending at or below the last one taken in is a
 * copy and is dropped. A new session also voids whatever was half-received: open transactions
 * are abandoned with their buffer (closed with the intake) and a fresh buffer takes over.
 */
import type { CommittedTransaction, NonTransactionalMessage, TransactionBuffer } from '../buffer/index.js';
import type { PgoutputMessage } from './pgoutput/messages.js';
import { formatLsn, parseLsn, ZERO_LSN } from './position.js';
import type { Lsn, MessageChange } from './types.js';

export interface TransactionIntakeOptions {
  /** A new, empty transaction buffer (one at start, another after each session with open transactions). */
  newBuffer(): TransactionBuffer;
  /** A non-transactional logical message, delivered as it arrives. */
  onMessage(message: MessageChange, walStart: Lsn): void;
  /** A transaction was queued. */
  onQueued(): void;
}

export interface TransactionIntake {
  /**
   * Takes one message in: into the buffer, and what completes into the queue. Synchronous when
   * the buffer need not wait for the disk (nearly always); otherwise a promise of the same.
   */
  take(message: PgoutputMessage, walStart: bigint, size: number): Promise<void> | undefined;
  /** A new session re-sends from the durable position: whatever was half-received is void. */
  resetForSession(): void;
  /** `lsn` and everything before it is durable downstream: off the in-flight list. Throws a RangeError beyond the last transaction taken in. */
  acknowledge(lsn: Lsn): void;
  /** The next queued transaction. */
  shift(): CommittedTransaction | undefined;
  /** Transactions taken in and not yet acknowledged (queued or handed out). */
  readonly inFlightTransactions: number;
  readonly inFlightBytes: number;
  /** Transactions begun (or streamed) and not yet committed. */
  readonly openTransactions: number;
  /** The buffers' memory, bytes in spill files, and transactions spilled (every session's buffer). */
  bufferUsage(): { readonly memoryBytes: number; readonly spilledBytes: number; readonly spills: number };
  /** Releases what is queued and closes every buffer. */
  close(): Promise<void>;
}

interface InFlight {
  readonly endLsn: bigint;
  readonly bytes: number;
}

export function createTransactionIntake(options: TransactionIntakeOptions): TransactionIntake {
  let buffer = options.newBuffer();
  const retiredBuffers: TransactionBuffer[] = [];
  const queue: CommittedTransaction[] = [];
  const inFlight: InFlight[] = [];
  let inFlightBytes = 0;
  /** End LSN of the last complete transaction taken in: replays after a reconnect at or below it are dropped. */
  let lastTakenEnd = -1n;
  /** pgoutput bytes received per open transaction, and the transaction the next messages belong to. */
  let openXid: number | null = null;
  const openBytes = new Map<number, number>();

  function trackBytes(message: PgoutputMessage, size: number): void {
    switch (message.tag) {
      case 'begin':
        openXid = message.xid;
        openBytes.set(message.xid, size);
        return;
      case 'stream-start':
        openXid = message.xid;
        openBytes.set(message.xid, (openBytes.get(message.xid) ?? 0) + size);
        return;
      case 'stream-stop':
        openXid = null;
        return;
      case 'stream-abort':
        if (message.xid === message.subXid) openBytes.delete(message.xid);
        return;
      default:
        if (openXid !== null) openBytes.set(openXid, (openBytes.get(openXid) ?? 0) + size);
    }
  }

  function taken(message: PgoutputMessage, result: CommittedTransaction | NonTransactionalMessage | null, size: number): Promise<void> | undefined {
    if (message.tag === 'commit') openXid = null;
    if (!result) return undefined;
    if (result.kind === 'message') {
      options.onMessage(result.message, result.walStart);
      return undefined;
    }
    const tx = result;
    const bytes = openBytes.get(tx.xid) ?? size;
    openBytes.delete(tx.xid);
    const end = parseLsn(tx.endLsn);
    if (end <= lastTakenEnd) {
      // Re-sent after a reconnect, and already taken in by this process: drop the copy.
      return tx.release();
    }
    lastTakenEnd = end;
    inFlight.push({ endLsn: end, bytes });
    inFlightBytes += bytes;
    queue.push(tx);
    options.onQueued();
    return undefined;
  }

  return {
    take(message, walStart, size) {
      trackBytes(message, size);
      // The buffer reads walStart only for a non-transactional logical message (it is delivered at once, with it).
      const result = buffer.pushNow(message, message.tag === 'message' ? formatLsn(walStart) : ZERO_LSN);
      return result instanceof Promise ? result.then((r) => taken(message, r, size)) : taken(message, result, size);
    },
    resetForSession() {
      openXid = null;
      openBytes.clear();
      if (buffer.openTransactions > 0) {
        retiredBuffers.push(buffer);
        buffer = options.newBuffer();
      }
    },
    acknowledge(lsn) {
      const value = parseLsn(lsn);
      if (value > lastTakenEnd) {
        throw new RangeError(`cannot acknowledge ${lsn}: beyond the last received transaction (${lastTakenEnd < 0n ? 'none' : formatLsn(lastTakenEnd)})`);
      }
      while (inFlight.length > 0 && (inFlight[0] as InFlight).endLsn <= value) {
        inFlightBytes -= (inFlight.shift() as InFlight).bytes;
      }
    },
    shift: () => queue.shift(),
    get inFlightTransactions() {
      return inFlight.length;
    },
    get inFlightBytes() {
      return inFlightBytes;
    },
    get openTransactions() {
      return buffer.openTransactions;
    },
    bufferUsage() {
      let memoryBytes = 0;
      let spilledBytes = 0;
      let spills = 0;
      for (const b of [...retiredBuffers, buffer]) {
        memoryBytes += b.memoryBytes;
        spilledBytes += b.spilledBytes;
        spills += b.spills;
      }
      return { memoryBytes, spilledBytes, spills };
    },
    async close() {
      for (const tx of queue.splice(0)) await tx.release().catch(() => {});
      for (const b of [...retiredBuffers.splice(0), buffer]) await b.close().catch(() => {});
    },
  };
}
