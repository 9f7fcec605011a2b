/**
 * The two shapes of a committed transaction the buffer hands out: held in memory (the common
 * case, a class with its methods on the prototype) or spilled (read back from its spill file).
 */
import { EventAssemblerError } from '../errors.js';
import type { Change, Lsn, SourcePosition } from '../source/types.js';
import type { SpillFile } from './spill-file.js';
import type { CommittedTransaction } from './types.js';

/** What a committed transaction carries besides its changes. */
export interface CommittedHeader {
  readonly kind: 'transaction';
  readonly xid: number;
  readonly commitLsn: Lsn;
  readonly endLsn: Lsn;
  readonly commitTime: string;
  readonly origin: string | null;
  readonly position: SourcePosition;
  readonly changeCount: number;
  readonly messageCount: number;
}

/**
 * A committed transaction whose changes live in `file`; `skip` lists aborted subxids whose
 * records stay in the file. `onRelease` runs before the file is removed.
 */
export function spilledTransaction(base: CommittedHeader, file: SpillFile, skip: ReadonlySet<number>, onRelease: () => void): CommittedTransaction {
  return {
    ...base,
    spilled: true,
    changes: () => file.read(skip),
    sequence: () => ({ length: base.changeCount, [Symbol.iterator]: () => file.readSync(skip) }),
    async toArray() {
      const out: Change[] = [];
      for await (const c of file.read(skip)) out.push(c);
      return out;
    },
    async release() {
      onRelease();
      await file.remove();
    },
  };
}

/** A committed transaction held in memory (the common case): methods on the prototype, no closures per transaction. */
export class InMemoryTransaction implements CommittedTransaction {
  readonly kind = 'transaction' as const;
  readonly spilled = false;
  readonly xid: number;
  readonly commitLsn: Lsn;
  readonly endLsn: Lsn;
  readonly commitTime: string;
  readonly origin: string | null;
  readonly position: SourcePosition;
  readonly changeCount: number;
  readonly messageCount: number;
  #changes: Change[] | null;

  constructor(
    base: { xid: number; commitLsn: Lsn; endLsn: Lsn; commitTime: string; origin: string | null; position: SourcePosition; changeCount: number; messageCount: number },
    changes: Change[],
  ) {
    this.xid = base.xid;
    this.commitLsn = base.commitLsn;
    this.endLsn = base.endLsn;
    this.commitTime = base.commitTime;
    this.origin = base.origin;
    this.position = base.position;
    this.changeCount = base.changeCount;
    this.messageCount = base.messageCount;
    this.#changes = changes;
  }

  #released(): EventAssemblerError {
    return new EventAssemblerError('BUFFER_TRANSACTION_RELEASED', `transaction ${this.xid} (${this.commitLsn}) was already released`, { xid: this.xid, commitLsn: this.commitLsn });
  }

  changes(): AsyncIterableIterator<Change> {
    const list = this.#changes;
    const released = list === null ? this.#released() : null;
    return (async function* () {
      if (list === null) throw released!;
      yield* list;
    })();
  }

  sequence(): readonly Change[] {
    if (this.#changes === null) throw this.#released();
    return this.#changes;
  }

  toArray(): Promise<Change[]> {
    return this.#changes === null ? Promise.reject(this.#released()) : Promise.resolve(this.#changes.slice());
  }

  /** What `readChanges` gives (the changes, then released), without waiting: they are in memory. */
  takeChanges(): Change[] {
    const list = this.#changes;
    if (list === null) throw this.#released();
    this.#changes = null;
    return list;
  }

  release(): Promise<void> {
    this.#changes = null;
    return Promise.resolve();
  }
}
