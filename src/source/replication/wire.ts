/**
 * The replication sub-protocol's bytes and commands (PostgreSQL "Streaming Replication
 * Protocol"), as pure functions:
 * - XLogData `w`: walStart(8) walEnd(8) sendTime(8) payload — payload is one pgoutput message;
 * - primary keepalive `k`: walEnd(8) sendTime(8) replyRequested(1);
 * - standby status update `r`: write(8) flush(8) apply(8) clientTime(8) replyRequested(1).
 * Times are microseconds since 2000-01-01 00:00:00 UTC.
 */
import { formatLsn, parseLsn } from '../position.js';
import type { Lsn } from '../types.js';

/** Milliseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01T00:00:00Z). */
const PG_EPOCH_MS = 946_684_800_000n;

/** First byte of a CopyData message from the primary. */
export const XLOG_DATA = 0x77; // 'w'
export const PRIMARY_KEEPALIVE = 0x6b; // 'k'
/** Byte offset of an XLogData message's payload (after kind, walStart, walEnd, sendTime). */
export const XLOG_DATA_HEADER_BYTES = 25;

/**
 * The 34-byte standby status update, reporting `durable` as written, flushed and applied.
 * For a logical slot the flush position is what moves confirmed_flush_lsn (walsender.c
 * `ProcessStandbyReplyMessage` → `LogicalConfirmReceivedLocation(flushPtr)`).
 */
export function standbyStatusUpdate(durable: Lsn, replyRequested = false, now = Date.now()): Buffer {
  const flush = parseLsn(durable);
  const message = Buffer.alloc(34);
  message.write('r', 0, 'latin1');
  message.writeBigUInt64BE(flush, 1);
  message.writeBigUInt64BE(flush, 9);
  message.writeBigUInt64BE(flush, 17);
  message.writeBigInt64BE((BigInt(now) - PG_EPOCH_MS) * 1000n, 25);
  message.writeUInt8(replyRequested ? 1 : 0, 33);
  return message;
}

export function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

export function quoteIdent(value: string): string {
  return `"${value.replace(/"/g, '""')}"`;
}

export interface StartReplicationOptions {
  readonly slot: string;
  readonly publications: readonly string[];
  readonly protocolVersion: 1 | 2;
  readonly streaming: boolean;
  readonly messages: boolean;
}

/** `START_REPLICATION SLOT … LOGICAL <lsn> (pgoutput options)`; streaming is asked for only with protocol 2. */
export function startReplicationSql(options: StartReplicationOptions, startLsn: bigint): string {
  const pluginOptions = [
    `proto_version ${quoteLiteral(String(options.protocolVersion))}`,
    `publication_names ${quoteLiteral(options.publications.map(quoteIdent).join(','))}`,
    `messages ${quoteLiteral(String(options.messages))}`,
  ];
  if (options.protocolVersion >= 2 && options.streaming) pluginOptions.push(`streaming 'on'`);
  return `START_REPLICATION SLOT ${quoteIdent(options.slot)} LOGICAL ${formatLsn(startLsn)} (${pluginOptions.join(', ')})`;
}
