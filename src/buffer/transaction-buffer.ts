/**
 * The transaction buffer: pgoutput messages in, complete transactions out, in commit order.
 *
 * - Non-streamed transactions arrive whole between Begin and Commit (PostgreSQL's reorder
 *   buffer replays them at commit), so at most one is open at a time.
 * - Streamed transactions (proto v2, `streaming 'on'`) arrive as chunks between Stream Start
 *   and Stream Stop, interleaved with whole transactions, and end with Stream Commit or Stream
 *   Abort. Row messages in a chunk carry the (sub)transaction xid; changes are kept under the
 *   top-level xid with their subxid, so a Stream Abort of a subtransaction removes exactly its
 *   changes. PostgreSQL sends one Stream Abort per aborted streamed subtransaction (decode.c
 *   `DecodeAbort` aborts every subxact listed in the abort record, each reaching
 *   `stream_abort` when it was streamed), which covers nested subtransactions.
 * - Memory: each change is charged an estimate of its decoded size; when the total over all open
 *   transactions exceeds the limit, the largest open transaction moves to a spill file and its
 *   later changes go straight to disk (the same policy as PostgreSQL's reorder buffer).
 * - A spilled transaction's later row messages are written as sent and decoded into rows only
 *   when read back. Measured: after an in-memory phase of tens of MB, V8 pretenures the row and
 *   change allocation sites, so rows built and dropped at once on the capture path went straight
 *   to old space as garbage and the heap grew by ~400 bytes per spilled row until a major GC
 *   (peak RSS ~350 MB for a 1M-row transaction instead of ~200 MB). Value decoding errors of a
 *   spilled transaction therefore surface when it is read, not when it is pushed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventAssemblerError, ProtocolStateError } from '../errors.js';
import { checkWidth, messageChange, rowChangeOf, truncateChange } from '../source/changes.js';
import type { DeleteMessage, InsertMessage, PgoutputMessage, TupleData, UpdateMessage } from '../source/pgoutput/messages.js';
import { createRelationRegistry } from '../source/relations.js';
import type { Change, Lsn, SchemaChange, SourcePosition } from '../source/types.js';
import type {
  CommittedTransaction, NonTransactionalMessage, TransactionBuffer, TransactionBufferOptions,
} from './index.js';
import { createRelationTable } from './spill-codec.js';
import { SpillFile } from './spill-file.js';

export const DEFAULT_MEMORY_LIMIT_BYTES = 64 * 1024 * 1024;

const RESOLVED_NULL: Promise<null> = Promise.resolve(null);

// Calibrated on Node 20 (heapUsed after GC / changes held): a 5-column insert of ~100 bytes of
// text takes ~750-800 bytes of heap as change + row + key objects.
const CHANGE_OVERHEAD_BYTES = 300;
const COLUMN_OVERHEAD_BYTES = 80;
const OTHER_CHANGE_BYTES = 512;

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

interface OpenTransaction {
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

export function createTransactionBuffer(options: TransactionBufferOptions): TransactionBuffer {
  const limit = options.memoryLimitBytes ?? DEFAULT_MEMORY_LIMIT_BYTES;
  const spillRoot = options.spillDir ?? tmpdir();
  const relations = options.relations ?? createRelationRegistry();
  const relationTable = createRelationTable();

  let memoryBytes = 0;
  let current: OpenTransaction | null = null; // non-streamed, between Begin and Commit
  let streamTop: OpenTransaction | null = null; // streamed, between Stream Start and Stream Stop
  const streamed = new Map<number, OpenTransaction>();
  /** Schema changes announced outside any transaction wait for the next one. */
  let pendingSchema: SchemaChange[] = [];
  let spillDir: Promise<string> | null = null;
  let spillSeq = 0;
  const liveSpills = new Set<SpillFile>();
  let closed = false;

  function open(xid: number, isStreamed: boolean): OpenTransaction {
    return { xid, streamed: isStreamed, origin: null, changes: [], subXids: [], bytes: 0, count: 0, messages: 0, perXid: new Map(), aborted: new Set(), spill: null };
  }

  function allOpen(): OpenTransaction[] {
    const list = [...streamed.values()];
    if (current !== null) list.push(current);
    return list;
  }

  async function spill(txn: OpenTransaction): Promise<void> {
    spillDir ??= mkdtemp(join(spillRoot, 'event-assembler-spill-'));
    const dir = await spillDir;
    const file = await SpillFile.create(join(dir, `xid-${txn.xid}-${++spillSeq}.spill`), relationTable);
    liveSpills.add(file);
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
      for (const t of allOpen()) if (t.spill === null && t.bytes > (largest?.bytes ?? 0)) largest = t;
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

  /** Adds a change; returns a promise only when it has to wait for disk (spill or flush). */
  function add(txn: OpenTransaction, subXid: number, change: Change, bytes: number): Promise<void> | undefined {
    count(txn, subXid, bytes);
    if (txn.spill !== null) return txn.spill.append(subXid, change);
    txn.changes.push(change);
    if (txn.streamed) txn.subXids.push(subXid);
    txn.bytes += bytes;
    memoryBytes += bytes;
    return memoryBytes > limit ? enforceLimit() : undefined;
  }

  /**
   * Adds a row message. A spilled transaction stores it as sent and converts it when read back:
   * no row objects are built on the capture path (see the module comment on pretenuring).
   */
  function addRow(txn: OpenTransaction, subXid: number, message: InsertMessage | UpdateMessage | DeleteMessage): Promise<void> | undefined {
    const entry = relations.mustGet(message.relationId);
    const bytes = CHANGE_OVERHEAD_BYTES + (message.tag === 'delete' ? 0 : estimateTuple(message.newTuple))
      + (message.tag === 'insert' ? 0 : estimateTuple(message.oldTuple));
    if (txn.spill === null) return add(txn, subXid, rowChangeOf(entry, message), bytes);
    if (message.tag !== 'delete') checkWidth(entry, message.newTuple);
    if (message.tag !== 'insert' && message.oldTuple !== null) checkWidth(entry, message.oldTuple);
    count(txn, subXid, bytes);
    return txn.spill.appendRow(subXid, message, entry.version);
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

  function abortSubtransaction(txn: OpenTransaction, subXid: number): void {
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
  }

  /** A committed transaction's header. */
  function committed(txn: OpenTransaction, commitLsn: Lsn, endLsn: Lsn, commitTime: string) {
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

  /** The committed transaction when it is held in memory (no disk to wait for), else null. */
  function finishInMemory(txn: OpenTransaction, commitLsn: Lsn, endLsn: Lsn, commitTime: string): CommittedTransaction | null {
    if (txn.spill !== null) return null;
    const base = committed(txn, commitLsn, endLsn, commitTime);
    memoryBytes -= txn.bytes;
    const changes = txn.changes;
    txn.changes = [];
    return new InMemoryTransaction(base, changes);
  }

  async function finish(txn: OpenTransaction, commitLsn: Lsn, endLsn: Lsn, commitTime: string): Promise<CommittedTransaction> {
    const inMemory = finishInMemory(txn, commitLsn, endLsn, commitTime);
    if (inMemory !== null) return inMemory;
    const base = committed(txn, commitLsn, endLsn, commitTime);
    const file = txn.spill!;
    await file.finish();
    const skip: ReadonlySet<number> = txn.aborted;
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
        liveSpills.delete(file);
        await file.remove();
      },
    };
  }

  /** The transaction and subxid a change message belongs to. */
  function target(xid: number | undefined, tag: string): { txn: OpenTransaction; subXid: number } | null {
    if (xid !== undefined) {
      if (streamTop === null) throw new ProtocolStateError(`${tag} with xid ${xid} outside a Stream Start/Stop block`, { xid, tag });
      return { txn: streamTop, subXid: xid };
    }
    if (streamTop !== null) throw new ProtocolStateError(`${tag} without xid inside a stream block: decode with { streaming: true } between Stream Start and Stop`, { tag });
    return current === null ? null : { txn: current, subXid: current.xid };
  }

  function mustTarget(xid: number | undefined, tag: string): { txn: OpenTransaction; subXid: number } {
    const t = target(xid, tag);
    if (t === null) throw new ProtocolStateError(`${tag} outside a transaction`, { tag });
    return t;
  }

  async function flushPendingSchema(txn: OpenTransaction): Promise<void> {
    if (pendingSchema.length === 0) return;
    const list = pendingSchema;
    pendingSchema = [];
    for (const s of list) await add(txn, txn.xid, s, OTHER_CHANGE_BYTES);
  }

  async function pushOther(message: Exclude<PgoutputMessage, { tag: 'insert' | 'update' | 'delete' }>, walStart: Lsn): Promise<CommittedTransaction | NonTransactionalMessage | null> {
    switch (message.tag) {
      case 'begin':
        if (current !== null) throw new ProtocolStateError(`Begin of xid ${message.xid} while xid ${current.xid} is open`, { xid: message.xid, openXid: current.xid });
        if (streamTop !== null) throw new ProtocolStateError(`Begin of xid ${message.xid} inside a stream block`, { xid: message.xid });
        current = open(message.xid, false);
        await flushPendingSchema(current);
        return null;
      case 'commit': {
        const txn = current;
        if (txn === null) throw new ProtocolStateError(`Commit ${message.commitLsn} without Begin`, { commitLsn: message.commitLsn });
        current = null;
        return finish(txn, message.commitLsn, message.endLsn, message.commitTime);
      }
      case 'origin': {
        const txn = streamTop ?? current;
        if (txn !== null) txn.origin = message.name;
        return null;
      }
      case 'relation': {
        const t = target(message.xid, 'relation');
        const { schemaChange } = relations.apply(message);
        if (schemaChange !== null) {
          if (t === null) pendingSchema.push(schemaChange);
          else await add(t.txn, t.subXid, schemaChange, OTHER_CHANGE_BYTES);
        }
        return null;
      }
      case 'type':
        relations.recordType(message);
        return null;
      case 'truncate': {
        const { txn, subXid } = mustTarget(message.xid, 'truncate');
        await add(txn, subXid, truncateChange(relations, message), OTHER_CHANGE_BYTES);
        return null;
      }
      case 'message': {
        if (!message.transactional) return { kind: 'message', message: messageChange(message), walStart };
        const { txn, subXid } = mustTarget(message.xid, 'message');
        txn.messages += 1;
        await add(txn, subXid, messageChange(message), OTHER_CHANGE_BYTES + message.content.length + message.prefix.length);
        return null;
      }
      case 'stream-start': {
        if (streamTop !== null) throw new ProtocolStateError(`Stream Start of xid ${message.xid} inside the stream block of xid ${streamTop.xid}`, { xid: message.xid });
        if (current !== null) throw new ProtocolStateError(`Stream Start of xid ${message.xid} inside transaction ${current.xid}`, { xid: message.xid });
        let txn = streamed.get(message.xid);
        if (txn !== undefined && message.firstSegment) {
          // A first segment for a transaction we hold means the server restarted it: start over.
          await drop(txn);
          txn = undefined;
        }
        if (txn === undefined) {
          txn = open(message.xid, true);
          streamed.set(message.xid, txn);
          await flushPendingSchema(txn);
        }
        streamTop = txn;
        return null;
      }
      case 'stream-stop':
        streamTop = null;
        return null;
      case 'stream-commit': {
        const txn = streamed.get(message.xid);
        if (txn === undefined) {
          throw new ProtocolStateError(`Stream Commit of xid ${message.xid} whose changes were never streamed to this buffer`, { xid: message.xid, commitLsn: message.commitLsn });
        }
        streamed.delete(message.xid);
        if (streamTop === txn) streamTop = null;
        return finish(txn, message.commitLsn, message.endLsn, message.commitTime);
      }
      case 'stream-abort': {
        const txn = streamed.get(message.xid);
        if (txn === undefined) return null;
        if (message.subXid === message.xid) {
          streamed.delete(message.xid);
          if (streamTop === txn) streamTop = null;
          await drop(txn);
        } else {
          abortSubtransaction(txn, message.subXid);
        }
        return null;
      }
    }
  }

  function pushNow(message: PgoutputMessage, walStart: Lsn): CommittedTransaction | NonTransactionalMessage | null | Promise<CommittedTransaction | NonTransactionalMessage | null> {
    if (closed) throw new ProtocolStateError('transaction buffer is closed');
    switch (message.tag) {
      case 'insert':
      case 'update':
      case 'delete': {
        const { txn, subXid } = mustTarget(message.xid, message.tag);
        const pending = addRow(txn, subXid, message);
        return pending === undefined ? null : pending.then(() => null);
      }
      case 'begin':
        // What pushOther does, when no schema change waits to be written into the transaction.
        if (current === null && streamTop === null && pendingSchema.length === 0) {
          current = open(message.xid, false);
          return null;
        }
        break;
      case 'commit':
        if (current !== null && current.spill === null) {
          const txn = current;
          current = null;
          return finishInMemory(txn, message.commitLsn, message.endLsn, message.commitTime);
        }
        break;
      default:
        break;
    }
    return pushOther(message, walStart);
  }

  return {
    get memoryBytes() { return memoryBytes; },
    get openTransactions() { return streamed.size + (current === null ? 0 : 1); },
    relations,

    push(message: PgoutputMessage, walStart: Lsn): Promise<CommittedTransaction | NonTransactionalMessage | null> {
      // pushNow, as a promise: a shared resolved one when there is nothing to hand out (one fewer
      // promise per change also keeps promise-tracking hooks, such as test runners install, from
      // promoting garbage).
      try {
        const result = pushNow(message, walStart);
        return result === null ? RESOLVED_NULL : result instanceof Promise ? result : Promise.resolve(result);
      } catch (e) {
        return Promise.reject(e);
      }
    },

    pushNow,

    async close() {
      if (closed) return;
      closed = true;
      for (const t of allOpen()) await drop(t);
      streamed.clear();
      current = null;
      streamTop = null;
      for (const f of liveSpills) await f.remove();
      liveSpills.clear();
      if (spillDir !== null) {
        const dir = await spillDir.catch(() => null);
        if (dir !== null) await rm(dir, { recursive: true, force: true });
      }
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
