import type { Change, SourceTransaction } from '../source/types.js';
import type { CommittedTransaction } from './index.js';

/** The mapper-facing transaction: `tx`'s header with `changes` in memory. */
export function withChanges(tx: CommittedTransaction, changes: readonly Change[]): SourceTransaction {
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

/** Reads `tx`'s changes into memory (from its spill file, if any) and releases the file. */
export async function readChanges(tx: CommittedTransaction): Promise<Change[]> {
  try {
    return await tx.toArray();
  } finally {
    await tx.release();
  }
}
