/**
 * From a committed transaction to what a mapper sees: its changes read into memory (or taken
 * without waiting when it is held in memory), or its header joined with a change sequence.
 */
import type { Change, ChangeSequence, SourceTransaction } from '../source/types.js';
import type { CommittedTransaction } from './types.js';
import { InMemoryTransaction } from './committed-transaction.js';

/** The mapper-facing transaction: `tx`'s header with its `changes` (in memory, or a sequence read from disk). */
export function withChanges(tx: CommittedTransaction, changes: ChangeSequence): SourceTransaction {
  return {
    kind: 'transaction',
    xid: tx.xid,
    commitLsn: tx.commitLsn,
    endLsn: tx.endLsn,
    commitTime: tx.commitTime,
    origin: tx.origin,
    position: tx.position,
    changes,
  };
}

/**
 * `readChanges` without a promise when `tx` is held in memory (`null` otherwise: read it with
 * `readChanges`). The transaction is released either way once its changes are taken.
 */
export function readChangesNow(tx: CommittedTransaction): Change[] | null {
  return tx instanceof InMemoryTransaction ? tx.takeChanges() : null;
}

/** Reads `tx`'s changes into memory (from its spill file, if any) and releases the file. */
export async function readChanges(tx: CommittedTransaction): Promise<Change[]> {
  try {
    return await tx.toArray();
  } finally {
    await tx.release();
  }
}
