// How far the assembler got, seen from the outside: the in-memory KurrentDB's streams (events
// appended, the highest receipt commit LSN) and the slot's confirmed_flush_lsn in PostgreSQL.
// Kill moments are chosen from these, so a kill lands where the test means it to.
import { receiptFromMetadata } from '../../src/sink/receipt.js';
import { parseLsn } from '../../src/source/position.js';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';

export interface DestinationProgress {
  /** Events in business streams (system, checkpoint and failed-record streams left out). */
  readonly events: number;
  /** Highest receipt commit LSN (this assembler's transactions) at a stream's tail, as a bigint (0n when none). */
  readonly maxCommitLsn: bigint;
}

const decoder = new TextDecoder();

/** Scans every stream's tail. Cheap enough for tens of thousands of streams every ~100 ms. */
export function destinationProgress(db: InMemoryKurrentDB, assembler: string): DestinationProgress {
  let events = 0;
  let maxCommitLsn = 0n;
  for (const stream of db.streamNames()) {
    if (stream.startsWith('$') || stream.startsWith('event-assembler.')) continue;
    const stored = db.readStreamEvents(stream);
    events += stored.length;
    const tail = stored[stored.length - 1];
    if (!tail) continue;
    try {
      const receipt = receiptFromMetadata(JSON.parse(decoder.decode(tail.metadata)));
      if (receipt?.kind === 'transaction' && receipt.assembler === assembler) {
        const value = parseLsn(receipt.commitLsn);
        if (value > maxCommitLsn) maxCommitLsn = value;
      }
    } catch {
      // not JSON metadata: not ours
    }
  }
  return { events, maxCommitLsn };
}
