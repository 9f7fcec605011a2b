/**
 * The buffer stage's shared types: what goes in (options, pgoutput messages), what comes out
 * (committed transactions, non-transactional messages) and the buffer's own interface.
 * Implementations import these from here, never from `index.ts` (no import circles).
 */
import type { PgoutputMessage } from '../source/pgoutput/messages.js';
import type { RelationRegistry } from '../source/relations.js';
import type { Change, ChangeSequence, Lsn, MessageChange, SourcePosition, SourceTransaction } from '../source/types.js';

export interface CommittedTransaction extends Omit<SourceTransaction, 'changes'> {
  /** Number of changes (SchemaChange entries included). */
  readonly changeCount: number;
  /** Transactional logical decoding messages among the changes (0: none to look for). */
  readonly messageCount: number;
  /** True when (part of) the changes live in a spill file. */
  readonly spilled: boolean;
  /** The changes in order; read back from disk (streaming, bounded memory) when spilled. */
  changes(): AsyncIterable<Change>;
  /**
   * The changes in order as a sequence that can be iterated again and again, synchronously,
   * without holding them: the array itself when in memory, else read back from the spill file
   * a chunk at a time on each iteration. For mapping a large transaction in bounded memory.
   * Valid until `release()`.
   */
  sequence(): ChangeSequence;
  /** Convenience for small transactions: all changes in one array. */
  toArray(): Promise<Change[]>;
  /** Removes spill files and drops the changes. Idempotent. */
  release(): Promise<void>;
}

/** A non-transactional logical decoding message (`pg_logical_emit_message(false, …)`), delivered as soon as it is decoded. */
export interface NonTransactionalMessage {
  readonly kind: 'message';
  readonly message: MessageChange;
  /** XLogData walStart of the message. */
  readonly walStart: Lsn;
}

export interface TransactionBufferOptions {
  /**
   * Estimated bytes of decoded changes this buffer holds in memory (all open transactions
   * together) before the largest transaction spills to disk. Default 64 MiB (`64 * 1024 * 1024`).
   */
  memoryLimitBytes?: number;
  /** Directory for spill files (one sub-directory per buffer). Default `os.tmpdir()`. Files are removed on `release()`/`close()`. */
  spillDir?: string;
  /** Builds the source position of a committed transaction; supplied by the source stage. */
  makePosition(commitLsn: Lsn, xid: number): SourcePosition;
  /** Relation registry used to decode tuples and detect schema changes. Default: a new, empty one. */
  relations?: RelationRegistry;
}

export interface TransactionBuffer {
  /**
   * Feed decoded messages in stream order, with the XLogData walStart of each (read only for a
   * non-transactional logical message, which is delivered at once with it); yields what completed.
   */
  push(message: PgoutputMessage, walStart: Lsn): Promise<CommittedTransaction | NonTransactionalMessage | null>;
  /**
   * What `push` does, without a promise when nothing has to wait for the disk (row changes,
   * Begin, and the Commit of a transaction held in memory — nearly every message): the result
   * itself, else a promise of it. Throws what `push` would reject with.
   */
  pushNow(message: PgoutputMessage, walStart: Lsn): CommittedTransaction | NonTransactionalMessage | null | Promise<CommittedTransaction | NonTransactionalMessage | null>;
  /** Estimated bytes of decoded changes currently held in memory. */
  readonly memoryBytes: number;
  /** Bytes in spill files now (open transactions and committed ones not yet released). */
  readonly spilledBytes: number;
  /** Transactions spilled to disk by this buffer so far. */
  readonly spills: number;
  /** Number of transactions (streamed or not) currently open. */
  readonly openTransactions: number;
  /** The relation registry in use. */
  readonly relations: RelationRegistry;
  /** Drops open transactions and removes every spill file, including those of unreleased committed transactions. */
  close(): Promise<void>;
}
