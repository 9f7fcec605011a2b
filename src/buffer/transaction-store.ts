/**
 * Where the open transactions' changes are kept, and what they cost: each change is charged an
 * estimate of its decoded size; when the total over all open transactions exceeds the limit, the
 * largest open transaction moves to a spill file and its later changes go straight to disk (the
 * same policy as PostgreSQL's reorder buffer). Also drops, aborts subtransactions and turns a
 * finished transaction into the committed transaction handed out. Which transaction a message
 * belongs to is the buffer's state machine's business (transaction-buffer.ts), not this file's.
 *
 * A spilled transaction's later row messages are written as sent and decoded into rows only
 * when read back. Measured: after an in-memory phase of tens of MB, V8 pretenures the row and
 * change allocation sites, so rows built and dropped at once on the capture path went straight
 * to old space as garbage and the heap grew by ~400 bytes per spilled row until a major GC
 * (peak RSS ~350 MB for a 1M-row transaction instead of ~200 MB). Value decoding errors of a
 * spilled transaction therefore surface when it is read, not when it is pushed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { checkWidth, rowChangeOf } from '../source/changes.js';
import type { DeleteMessage, InsertMessage, TupleData, UpdateMessage } from '../source/pgoutput/messages.js';
import type { RelationRegistry } from '../source/relations.js';
import type { Change, Lsn, SourcePosition } from '../source/types.js';
import { InMemoryTransaction, spilledTransaction, type CommittedHeader } from './committed-transaction.js';
import { createRelationTable } from './spill-codec.js';
import { SpillFile } from './spill-file.js';
import type { CommittedTransaction } from './types.js';

// Calibrated on Node 20 (heapUsed after GC / changes held): a 5-column insert of ~100 bytes of
// text takes ~750-800 bytes of heap as change + row + key objects.
const CHANGE_OVERHEAD_BYTES = 300;
const COLUMN_OVERHEAD_BYTES = 80;
/** Estimated bytes of a change other than a row change (schema change, truncate, message). */
export const OTHER_CHANGE_BYTES = 512;

/** Estimated heap bytes of a decoded row change: objects for the change, the rows and their values. */
function estimateTuple(tuple: TupleData | null): number {
  if (tuple === null) return 0;
  let bytes = 0;
  for (let i = 0; i < tuple.length; i++) {
    const v = tuple[i]!;
    bytes += COLUMN_OVERHEAD_BYTES;
    if (v.kind === 'text') bytes += v.value.length;
    else if (v.kind === 'binary') bytes += v.value.length;
  }
  return bytes;
}

/** Estimated heap bytes of the change a row message decodes into. */
export function estimateRowBytes(message: InsertMessage | UpdateMessage | DeleteMessage): number {
  return CHANGE_OVERHEAD_BYTES + (message.tag === 'delete' ? 0 : estimateTuple(message.newTuple))
    + (message.tag === 'insert' ? 0 : estimateTuple(message.oldTuple));
}

export interface OpenTransaction {
  readonly xid: number;
  readonly streamed: boolean;
  origin: string | null;
  /** In-memory changes; emptied when the transaction spills. */
  changes: Change[];
  /** Subxid of each in-memory change (streamed transactions only). */
  subXids: number[];
  /** Estimated bytes of the in-memory changes. */
  bytes: number;
  count: number;
  /** Transactional logical messages added (an aborted subtransaction's are not taken back: an upper bound). */
  messages: number;
  /** Per subxid (streamed only): change count and in-memory bytes. */
  readonly perXid: Map<number, { count: number; bytes: number }>;
  /** Aborted subxids whose records are still in the spill file. */
  readonly aborted: Set<number>;
  spill: SpillFile | null;
}

export interface TransactionStoreOptions {
  /** Estimated bytes held in memory (all open transactions together) before the largest spills. */
  readonly limit: number;
  /** Directory under which this store makes its own spill directory (on the first spill). */
  readonly spillRoot: string;
  readonly relations: RelationRegistry;
  makePosition(commitLsn: Lsn, xid: number): SourcePosition;
  /** The transactions open now, in the order ties on size are broken (the first largest spills). */
  openTransactions(): OpenTransaction[];
}

export interface TransactionStore {
  /** Estimated bytes of changes held in memory. */
  readonly memoryBytes: number;
  /** Bytes in this store's spill files now (written or waiting to be), summed on request. */
  readonly spilledBytes: number;
  /** Transactions spilled to disk so far. */
  readonly spills: number;
  open(xid: number, streamed: boolean): OpenTransaction;
  /** Adds a change; returns a promise only when it has to wait for disk (spill or flush). */
  add(txn: OpenTransaction, subXid: number, change: Change, bytes: number): Promise<void> | undefined;
  /** Adds a row message (stored as sent when `txn` is spilled); a promise only when waiting for disk. */
  addRow(txn: OpenTransaction, subXid: number, message: InsertMessage | UpdateMessage | DeleteMessage): Promise<void> | undefined;
  /** Takes back the changes of an aborted subtransaction of a streamed transaction. */
  abortSubtransaction(txn: OpenTransaction, subXid: number): void;
  /** Forgets `txn` and its spill file. */
  drop(txn: OpenTransaction): Promise<void>;
  /** The committed transaction when `txn` is held in memory (no disk to wait for), else null. */
  finishInMemory(txn: OpenTransaction, commitLsn: Lsn, endLsn: Lsn, commitTime: string): CommittedTransaction | null;
  finish(txn: OpenTransaction, commitLsn: Lsn, endLsn: Lsn, commitTime: string): Promise<CommittedTransaction>;
  /** Drops `open` and removes every spill file and the spill directory. */
  close(open: OpenTransaction[]): Promise<void>;
}

export function createTransactionStore(options: TransactionStoreOptions): TransactionStore {
  const { limit, relations } = options;
  const relationTable = createRelationTable();
  let memoryBytes = 0;
  let spillDir: Promise<string> | null = null;
  let spillSeq = 0;
  let spills = 0;
  const liveSpills = new Set<SpillFile>();

  async function spill(txn: OpenTransaction): Promise<void> {
    spillDir ??= mkdtemp(join(options.spillRoot, 'event-assembler-spill-'));
    const dir = await spillDir;
    const file = await SpillFile.create(join(dir, `xid-${txn.xid}-${++spillSeq}.spill`), relationTable);
    liveSpills.add(file);
    spills += 1;
    txn.spill = file;
    for (let i = 0; i < txn.changes.length; i++) await file.append(txn.streamed ? txn.subXids[i]! : txn.xid, txn.changes[i]!);
    memoryBytes -= txn.bytes;
    txn.bytes = 0;
    txn.changes = [];
    txn.subXids = [];
    for (const entry of txn.perXid.values()) entry.bytes = 0;
  }

  async function enforceLimit(): Promise<void> {
    while (memoryBytes > limit) {
      let largest: OpenTransaction | null = null;
      for (const t of options.openTransactions()) if (t.spill === null && t.bytes > (largest?.bytes ?? 0)) largest = t;
      if (largest === null) return;
      await spill(largest);
    }
  }

  function count(txn: OpenTransaction, subXid: number, bytes: number): void {
    txn.count++;
    if (txn.streamed) {
      let entry = txn.perXid.get(subXid);
      if (entry === undefined) txn.perXid.set(subXid, (entry = { count: 0, bytes: 0 }));
      entry.count++;
      if (txn.spill === null) entry.bytes += bytes;
    }
  }

  function add(txn: OpenTransaction, subXid: number, change: Change, bytes: number): Promise<void> | undefined {
    count(txn, subXid, bytes);
    if (txn.spill !== null) return txn.spill.append(subXid, change);
    txn.changes.push(change);
    if (txn.streamed) txn.subXids.push(subXid);
    txn.bytes += bytes;
    memoryBytes += bytes;
    return memoryBytes > limit ? enforceLimit() : undefined;
  }

  /** A committed transaction's header. */
  function committed(txn: OpenTransaction, commitLsn: Lsn, endLsn: Lsn, commitTime: string): CommittedHeader {
    return {
      kind: 'transaction' as const,
      xid: txn.xid,
      commitLsn,
      endLsn,
      commitTime,
      origin: txn.origin,
      position: options.makePosition(commitLsn, txn.xid),
      changeCount: txn.count,
      messageCount: txn.messages,
    };
  }

  function finishInMemory(txn: OpenTransaction, commitLsn: Lsn, endLsn: Lsn, commitTime: string): CommittedTransaction | null {
    if (txn.spill !== null) return null;
    const base = committed(txn, commitLsn, endLsn, commitTime);
    memoryBytes -= txn.bytes;
    const changes = txn.changes;
    txn.changes = [];
    return new InMemoryTransaction(base, changes);
  }

  async function drop(txn: OpenTransaction): Promise<void> {
    memoryBytes -= txn.bytes;
    txn.bytes = 0;
    txn.changes = [];
    txn.subXids = [];
    if (txn.spill !== null) {
      liveSpills.delete(txn.spill);
      await txn.spill.remove();
    }
  }

  return {
    get memoryBytes() { return memoryBytes; },
    get spilledBytes() {
      let bytes = 0;
      for (const file of liveSpills) bytes += file.size;
      return bytes;
    },
    get spills() { return spills; },

    open(xid, isStreamed) {
      return { xid, streamed: isStreamed, origin: null, changes: [], subXids: [], bytes: 0, count: 0, messages: 0, perXid: new Map(), aborted: new Set(), spill: null };
    },

    add,

    /**
     * A spilled transaction stores the message as sent and converts it when read back: no row
     * objects are built on the capture path (see the module comment on pretenuring).
     */
    addRow(txn, subXid, message) {
      const entry = relations.mustGet(message.relationId);
      const bytes = estimateRowBytes(message);
      if (txn.spill === null) return add(txn, subXid, rowChangeOf(entry, message), bytes);
      if (message.tag !== 'delete') checkWidth(entry, message.newTuple);
      if (message.tag !== 'insert' && message.oldTuple !== null) checkWidth(entry, message.oldTuple);
      count(txn, subXid, bytes);
      return txn.spill.appendRow(subXid, message, entry.version);
    },

    abortSubtransaction(txn, subXid) {
      const entry = txn.perXid.get(subXid);
      if (entry === undefined) return;
      txn.perXid.delete(subXid);
      txn.count -= entry.count;
      if (txn.spill !== null) {
        txn.aborted.add(subXid);
        return;
      }
      const keep: Change[] = [];
      const keepXids: number[] = [];
      for (let i = 0; i < txn.changes.length; i++) {
        if (txn.subXids[i] !== subXid) { keep.push(txn.changes[i]!); keepXids.push(txn.subXids[i]!); }
      }
      txn.changes = keep;
      txn.subXids = keepXids;
      txn.bytes -= entry.bytes;
      memoryBytes -= entry.bytes;
    },

    drop,
    finishInMemory,

    async finish(txn, commitLsn, endLsn, commitTime) {
      const inMemory = finishInMemory(txn, commitLsn, endLsn, commitTime);
      if (inMemory !== null) return inMemory;
      const base = committed(txn, commitLsn, endLsn, commitTime);
      const file = txn.spill!;
      await file.finish();
      return spilledTransaction(base, file, txn.aborted, () => liveSpills.delete(file));
    },

    async close(open) {
      for (const t of open) await drop(t);
      for (const f of liveSpills) await f.remove();
      liveSpills.clear();
      if (spillDir !== null) {
        const dir = await spillDir.catch(() => null);
        if (dir !== null) await rm(dir, { recursive: true, force: true });
      }
    },
  };
}
