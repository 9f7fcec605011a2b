/**
 * The transaction buffer's state machine: pgoutput messages in, complete transactions out, in
 * commit order. It decides which open transaction each message belongs to; keeping the changes,
 * charging their memory and spilling is the store's job (transaction-store.ts).
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
 * - Schema changes announced outside any transaction (a Relation message between transactions)
 *   are written into the next transaction that begins.
 */
import { tmpdir } from 'node:os';
import { ProtocolStateError } from '../errors.js';
import { messageChange, truncateChange } from '../source/changes.js';
import type { PgoutputMessage } from '../source/pgoutput/messages.js';
import { createRelationRegistry } from '../source/relations.js';
import type { Lsn, SchemaChange } from '../source/types.js';
import { createTransactionStore, OTHER_CHANGE_BYTES, type OpenTransaction } from './transaction-store.js';
import type { CommittedTransaction, NonTransactionalMessage, TransactionBuffer, TransactionBufferOptions } from './types.js';

export const DEFAULT_MEMORY_LIMIT_BYTES = 64 * 1024 * 1024;

const RESOLVED_NULL: Promise<null> = Promise.resolve(null);

export function createTransactionBuffer(options: TransactionBufferOptions): TransactionBuffer {
  const relations = options.relations ?? createRelationRegistry();
  let current: OpenTransaction | null = null; // non-streamed, between Begin and Commit
  let streamTop: OpenTransaction | null = null; // streamed, between Stream Start and Stream Stop
  const streamed = new Map<number, OpenTransaction>();
  /** Schema changes announced outside any transaction wait for the next one. */
  let pendingSchema: SchemaChange[] = [];
  let closed = false;

  function allOpen(): OpenTransaction[] {
    const list = [...streamed.values()];
    if (current !== null) list.push(current);
    return list;
  }

  const store = createTransactionStore({
    limit: options.memoryLimitBytes ?? DEFAULT_MEMORY_LIMIT_BYTES,
    spillRoot: options.spillDir ?? tmpdir(),
    relations,
    makePosition: options.makePosition,
    openTransactions: allOpen,
  });

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
    for (const s of list) await store.add(txn, txn.xid, s, OTHER_CHANGE_BYTES);
  }

  async function pushOther(message: Exclude<PgoutputMessage, { tag: 'insert' | 'update' | 'delete' }>, walStart: Lsn): Promise<CommittedTransaction | NonTransactionalMessage | null> {
    switch (message.tag) {
      case 'begin':
        if (current !== null) throw new ProtocolStateError(`Begin of xid ${message.xid} while xid ${current.xid} is open`, { xid: message.xid, openXid: current.xid });
        if (streamTop !== null) throw new ProtocolStateError(`Begin of xid ${message.xid} inside a stream block`, { xid: message.xid });
        current = store.open(message.xid, false);
        await flushPendingSchema(current);
        return null;
      case 'commit': {
        const txn = current;
        if (txn === null) throw new ProtocolStateError(`Commit ${message.commitLsn} without Begin`, { commitLsn: message.commitLsn });
        current = null;
        return store.finish(txn, message.commitLsn, message.endLsn, message.commitTime);
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
          else await store.add(t.txn, t.subXid, schemaChange, OTHER_CHANGE_BYTES);
        }
        return null;
      }
      case 'type':
        relations.recordType(message);
        return null;
      case 'truncate': {
        const { txn, subXid } = mustTarget(message.xid, 'truncate');
        await store.add(txn, subXid, truncateChange(relations, message), OTHER_CHANGE_BYTES);
        return null;
      }
      case 'message': {
        if (!message.transactional) return { kind: 'message', message: messageChange(message), walStart };
        const { txn, subXid } = mustTarget(message.xid, 'message');
        txn.messages += 1;
        await store.add(txn, subXid, messageChange(message), OTHER_CHANGE_BYTES + message.content.length + message.prefix.length);
        return null;
      }
      case 'stream-start': {
        if (streamTop !== null) throw new ProtocolStateError(`Stream Start of xid ${message.xid} inside the stream block of xid ${streamTop.xid}`, { xid: message.xid });
        if (current !== null) throw new ProtocolStateError(`Stream Start of xid ${message.xid} inside transaction ${current.xid}`, { xid: message.xid });
        let txn = streamed.get(message.xid);
        if (txn !== undefined && message.firstSegment) {
          // A first segment for a transaction we hold means the server restarted it: start over.
          await store.drop(txn);
          txn = undefined;
        }
        if (txn === undefined) {
          txn = store.open(message.xid, true);
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
        return store.finish(txn, message.commitLsn, message.endLsn, message.commitTime);
      }
      case 'stream-abort': {
        const txn = streamed.get(message.xid);
        if (txn === undefined) return null;
        if (message.subXid === message.xid) {
          streamed.delete(message.xid);
          if (streamTop === txn) streamTop = null;
          await store.drop(txn);
        } else {
          store.abortSubtransaction(txn, message.subXid);
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
        const pending = store.addRow(txn, subXid, message);
        return pending === undefined ? null : pending.then(() => null);
      }
      case 'begin':
        // What pushOther does, when no schema change waits to be written into the transaction.
        if (current === null && streamTop === null && pendingSchema.length === 0) {
          current = store.open(message.xid, false);
          return null;
        }
        break;
      case 'commit':
        if (current !== null && current.spill === null) {
          const txn = current;
          current = null;
          return store.finishInMemory(txn, message.commitLsn, message.endLsn, message.commitTime);
        }
        break;
      default:
        break;
    }
    return pushOther(message, walStart);
  }

  return {
    get memoryBytes() { return store.memoryBytes; },
    get spilledBytes() { return store.spilledBytes; },
    get spills() { return store.spills; },
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
      const open = allOpen();
      streamed.clear();
      current = null;
      streamTop = null;
      await store.close(open);
    },
  };
}
