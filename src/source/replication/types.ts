/**
 * The replication stream's shared types: its options and callbacks, the session it reports,
 * its interface, and the WAL positions its parts share.
 */
import type pg from 'pg';
import type { PgoutputMessage } from '../pgoutput/messages.js';
import type { Lsn } from '../types.js';
import type { SlotActiveError } from './errors.js';
import type { BackoffOptions } from './reconnect-policy.js';

export interface ReplicationSession {
  /** `pg_control` system identifier, decimal. */
  readonly systemId: string;
  readonly timeline: number;
  readonly database: string;
  /** The LSN passed to START_REPLICATION (the durable position of this process). */
  readonly startLsn: Lsn;
  /** The slot's `confirmed_flush_lsn` when the session started. */
  readonly confirmedFlushLsn: Lsn;
  /** 1 for the first session, 2 after the first reconnect, … */
  readonly number: number;
  /** `host:port` the session runs on (with several hosts: the one the host walk took). */
  readonly server: string;
}

export interface ReplicationStreamOptions {
  /** Connection settings of the capture role (several hosts: the first primary is taken, connect-source.ts); `replication: 'database'` is added here. */
  readonly connection: pg.ClientConfig;
  readonly slot: string;
  readonly publications: readonly string[];
  /** pgoutput `proto_version`. Default: 2 (needed for `streaming`). */
  readonly protocolVersion: 1 | 2;
  /** Ask for in-progress transactions to be streamed (protocol 2). Default: true. */
  readonly streaming: boolean;
  /** Ask for logical decoding messages (`pg_logical_emit_message`). Default: true. */
  readonly messages: boolean;
  /** Standby status update period; keep it well below the server's `wal_sender_timeout` (60 s by default). Default: 10 000 ms. */
  readonly statusIntervalMs: number;
  /** After an acknowledgement, the status update is sent within this delay (acks are coalesced). Default: 50 ms. */
  readonly feedbackDelayMs: number;
  readonly backoff: BackoffOptions;
  /** While another connection streams the slot (55006), how often to ask again (fixed, no backoff). Default: 1 000 ms. */
  readonly slotPollIntervalMs?: number;
  /** Where the first session starts when nothing was acknowledged yet. Default: `0/0` (= the slot's confirmed_flush_lsn). */
  readonly startLsn?: Lsn;

  /** A new session begins: anything half-received from the previous one must be dropped. */
  onSession(session: ReplicationSession): void;
  /**
   * One decoded XLogData message. `size` is the payload's byte length; `walStart` its XLogData
   * walStart (a number: formatting an LSN for every message showed in the profile, and only
   * non-transactional logical messages need it as text).
   */
  onMessage(message: PgoutputMessage, walStart: bigint, size: number): void;
  /** True when every received transaction is acknowledged and none is open: keepalive positions may then be acknowledged. */
  isIdle(): boolean;
  /** Caps the keepalive position acknowledged while idle (downstream records it first). Default: no cap. */
  idleLimit?(): bigint | null;
  /** A connection was lost (or could not be made) and a reconnect is scheduled after `delayMs`. */
  onDisconnect?(error: Error, delayMs: number, attempt: number): void;
  /**
   * The slot is streamed by another connection (`error.holder`: its walsender's pid and client,
   * and whether it is a lost connection of this stream's own); asked again after `delayMs`.
   */
  onSlotActive?(error: SlotActiveError, delayMs: number): void;
  /** A session reached streaming: the server accepted START_REPLICATION. */
  onStreaming?(): void;
  /** A fatal error: the stream stopped and will not reconnect. */
  onFatal(error: Error): void;
}

export interface ReplicationStream {
  /** Connects and starts streaming; reconnects on its own until closed or a fatal error. */
  start(): void;
  /** Declares everything up to `lsn` durable downstream; it becomes the reported flush position. */
  confirm(lsn: Lsn): void;
  /** Stops reading from the socket (status updates keep flowing). */
  pause(): void;
  resume(): void;
  readonly paused: boolean;
  readonly connected: boolean;
  /** The position reported to the server as written/flushed/applied. */
  readonly durableLsn: Lsn;
  /** The highest WAL end seen in XLogData or keepalives. */
  readonly receivedLsn: Lsn;
  readonly session: ReplicationSession | null;
  readonly reconnects: number;
  close(): Promise<void>;
}

/**
 * The positions the stream's parts share (mutable; the stream owns them, across sessions).
 * `durable` is what may be reported as flushed; `received` the highest WAL end seen;
 * `lastReported` the position last sent in a standby status update (-1: none yet).
 */
export interface WalPositions {
  durable: bigint;
  received: bigint;
  lastReported: bigint;
}
