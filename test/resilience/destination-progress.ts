// How far the assembler got, seen from the outside: the in-memory KurrentDB's streams (events
// appended, the highest receipt commit LSN) and the slot's confirmed_flush_lsn in PostgreSQL.
// Kill moments are chosen from these, so a kill lands where the test means it to.
import { parseLsn } from '../../src/source/position.js';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';

export interface DestinationProgress {
  /** Events in business streams (system, checkpoint and failed-record streams left out). */
  readonly events: number;
  /** Highest `receipt.commitLsn` at a stream's tail, as a bigint (0n when none). */
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
      const metadata = JSON.parse(decoder.decode(tail.metadata)) as Record<string, unknown>;
      const lsn = metadata['receipt.commitLsn'];
      if (typeof lsn === 'string' && metadata['receipt.assembler'] === assembler) {
        const value = parseLsn(lsn);
        if (value > maxCommitLsn) maxCommitLsn = value;
      }
    } catch {
      // not JSON metadata: not ours
    }
  }
  return { events, maxCommitLsn };
}
