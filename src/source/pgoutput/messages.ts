/**
 * pgoutput logical replication messages, as decoded from the `w` (XLogData) payloads of a
 * `START_REPLICATION … LOGICAL … (proto_version '1'|'2', publication_names '…', messages 'true',
 * streaming 'on')` stream. Field names follow PostgreSQL's "Logical Replication Message Formats".
 *
 * In protocol v2 streaming mode, row/relation/type/message/truncate messages that belong to a
 * streamed transaction carry the (sub)transaction `xid`; otherwise `xid` is undefined.
 */
import type { Lsn, ReplicaIdentity } from '../types.js';

/** One column of a TupleData: `n` null, `u` unchanged TOAST, `t` text, `b` binary. */
export type TupleValue =
  | { readonly kind: 'null' }
  | { readonly kind: 'unchanged-toast' }
  | { readonly kind: 'text'; readonly value: string }
  | { readonly kind: 'binary'; readonly value: Buffer };

export type TupleData = readonly TupleValue[];

export interface BeginMessage { readonly tag: 'begin'; readonly finalLsn: Lsn; readonly commitTime: string; readonly xid: number }
export interface CommitMessage { readonly tag: 'commit'; readonly flags: number; readonly commitLsn: Lsn; readonly endLsn: Lsn; readonly commitTime: string }
export interface OriginMessage { readonly tag: 'origin'; readonly originLsn: Lsn; readonly name: string }
export interface RelationColumnMessage { readonly flags: number; readonly name: string; readonly typeOid: number; readonly typeModifier: number }
export interface RelationMessage {
  readonly tag: 'relation'; readonly xid?: number; readonly relationId: number; readonly schema: string; readonly name: string;
  readonly replicaIdentity: ReplicaIdentity; readonly columns: readonly RelationColumnMessage[];
}
export interface TypeMessage { readonly tag: 'type'; readonly xid?: number; readonly typeOid: number; readonly schema: string; readonly name: string }
export interface InsertMessage { readonly tag: 'insert'; readonly xid?: number; readonly relationId: number; readonly newTuple: TupleData }
export interface UpdateMessage {
  readonly tag: 'update'; readonly xid?: number; readonly relationId: number;
  /** `K`: old key columns (key changed, default/index identity); `O`: whole old row (FULL). */
  readonly oldKind: 'key' | 'old' | null; readonly oldTuple: TupleData | null; readonly newTuple: TupleData;
}
export interface DeleteMessage { readonly tag: 'delete'; readonly xid?: number; readonly relationId: number; readonly oldKind: 'key' | 'old'; readonly oldTuple: TupleData }
export interface TruncateMessage { readonly tag: 'truncate'; readonly xid?: number; readonly cascade: boolean; readonly restartIdentity: boolean; readonly relationIds: readonly number[] }
export interface LogicalMessage { readonly tag: 'message'; readonly xid?: number; readonly transactional: boolean; readonly lsn: Lsn; readonly prefix: string; readonly content: Buffer }
export interface StreamStartMessage { readonly tag: 'stream-start'; readonly xid: number; readonly firstSegment: boolean }
export interface StreamStopMessage { readonly tag: 'stream-stop' }
export interface StreamCommitMessage { readonly tag: 'stream-commit'; readonly xid: number; readonly flags: number; readonly commitLsn: Lsn; readonly endLsn: Lsn; readonly commitTime: string }
/** Aborts the streamed top-level transaction when `subXid === xid`, otherwise only that subtransaction. */
export interface StreamAbortMessage { readonly tag: 'stream-abort'; readonly xid: number; readonly subXid: number }

export type PgoutputMessage =
  | BeginMessage | CommitMessage | OriginMessage | RelationMessage | TypeMessage
  | InsertMessage | UpdateMessage | DeleteMessage | TruncateMessage | LogicalMessage
  | StreamStartMessage | StreamStopMessage | StreamCommitMessage | StreamAbortMessage;
