/**
 * The replication connection: one `pg` client in `replication: 'database'` mode that runs
 * `IDENTIFY_SYSTEM` and `START_REPLICATION … LOGICAL` and then speaks the CopyBoth
 * sub-protocol itself.
 *
 * Why our own reader instead of pg-logical-replication's service: that service acks the
 * last *received* LSN from a timer (even with `auto: false`), ignores keepalives that ask
 * for a reply, and cannot parse protocol-v2 stream messages. Here the standby status
 * update always reports the durable position (what downstream acknowledged), keepalives
 * are answered, and the session is re-established with backoff after a connection loss.
 *
 * Wire formats (PostgreSQL "Streaming Replication Protocol"):
 * - XLogData `w`: walStart(8) walEnd(8) sendTime(8) payload — payload is one pgoutput message;
 * - primary keepalive `k`: walEnd(8) sendTime(8) replyRequested(1);
 * - standby status update `r`: write(8) flush(8) apply(8) clientTime(8) replyRequested(1).
 * Times are microseconds since 2000-01-01 00:00:00 UTC.
 */
import pg from 'pg';
import { EventAssemblerError } from '../errors.js';
import { createPgoutputDecoder } from './pgoutput/decoder.js';
import type { PgoutputMessage } from './pgoutput/messages.js';
import { formatLsn, parseLsn } from './position.js';
import type { Lsn } from './types.js';

/** Reply requests for the same position within this window that mean "the walsender is shutting down". */
const SHUTDOWN_PING_COUNT = 5;
const SHUTDOWN_PING_WINDOW_MS = 2_000;

/** Milliseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01T00:00:00Z). */
const PG_EPOCH_MS = 946_684_800_000n;

export interface BackoffOptions {
  /** First delay before reconnecting. Default: 500 ms. */
  readonly initialMs: number;
  /** Upper bound of a delay. Default: 30 000 ms. */
  readonly maxMs: number;
  /** Growth factor per failed attempt. Default: 2. */
  readonly multiplier: number;
  /** Random spread, 0..1: a delay d becomes d × (1 − jitter × random). Default: 0.5. */
  readonly jitter: number;
  /** Failed attempts in a row before giving up with an error. Default: unlimited. */
  readonly maxAttempts: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 30_000, multiplier: 2, jitter: 0.5, maxAttempts: Number.POSITIVE_INFINITY };

/** Delay before reconnect attempt number `attempt` (0-based): exponential, capped, with jitter. */
export function backoffDelay(attempt: number, backoff: BackoffOptions, random: () => number = Math.random): number {
  const raw = Math.min(backoff.maxMs, backoff.initialMs * backoff.multiplier ** attempt);
  return Math.max(0, Math.round(raw * (1 - backoff.jitter * random())));
}

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
}

export interface ReplicationStreamOptions {
  /** Connection settings of the capture role; `replication: 'database'` is added here. */
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
  /** A fatal error: the stream stopped and will not reconnect. */
  onFatal(error: Error): void;
}

/** A fatal problem with the replication connection (the slot, privileges, protocol). */
export class ReplicationError extends EventAssemblerError {
  constructor(code: string, message: string, details: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super(code, message, details, options);
  }
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

/** SQLSTATEs that mean "the server or connection went away, try again". */
const RETRYABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend, smart/fast shutdown)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, recovering)
  '53300', // too_many_connections
  '55006', // object_in_use: "replication slot … is active for PID …" — the previous walsender is still exiting
  '08000', '08003', '08006', '08001', '08004', // connection exceptions
]);

function isRetryable(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (e && typeof e.code === 'string') {
    if (RETRYABLE_SQLSTATES.has(e.code)) return true;
    if (/^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN)$/.test(e.code)) return true;
  }
  const message = e && typeof e.message === 'string' ? e.message : String(error);
  return /Connection terminated|terminating connection|the database system is (starting up|shutting down|in recovery)|server closed the connection|socket hang up|ECONNRESET|ECONNREFUSED/i.test(message);
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

function quoteIdent(value: string): string {
  return `"${value.replace(/"/g, '""')}"`;
}

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

interface ClientInternals {
  connection: {
    stream: NodeJS.ReadableStream & { pause(): void; resume(): void };
    on(event: 'copyData', listener: (message: { chunk: Buffer }) => void): void;
    once(event: 'replicationStart', listener: () => void): void;
    sendCopyFromChunk(chunk: Buffer): void;
  };
}

/** Bytes of replication data read between two yields to the event loop. */
const YIELD_BYTES = 64 * 1024;

export function createReplicationStream(options: ReplicationStreamOptions): ReplicationStream {
  let client: pg.Client | null = null;
  let internals: ClientInternals['connection'] | null = null;
  let closed = false;
  let fatal = false;
  let streaming = false;
  let paused = false;
  let durable: bigint = options.startLsn ? parseLsn(options.startLsn) : 0n;
  let received: bigint = durable;
  let lastReported: bigint = -1n;
  let session: ReplicationSession | null = null;
  let sessions = 0;
  let attempt = 0;
  let reconnects = 0;
  let statusTimer: NodeJS.Timeout | null = null;
  let feedbackTimer: NodeJS.Timeout | null = null;
  let reconnectTimer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;

  function sendStatus(replyRequested = false): void {
    if (!internals || !streaming) return;
    if (feedbackTimer) {
      clearTimeout(feedbackTimer);
      feedbackTimer = null;
    }
    try {
      internals.sendCopyFromChunk(standbyStatusUpdate(formatLsn(durable), replyRequested));
      lastReported = durable;
    } catch {
      // The socket is gone; the close handler reconnects.
    }
  }

  function scheduleFeedback(): void {
    if (feedbackTimer || !streaming) return;
    feedbackTimer = setTimeout(() => {
      feedbackTimer = null;
      if (durable !== lastReported) sendStatus();
    }, options.feedbackDelayMs);
  }

  function onCopyData(chunk: Buffer, decode: (payload: Buffer) => PgoutputMessage): void {
    const kind = chunk[0];
    if (kind === 0x77 /* w */) {
      const walStart = chunk.readBigUInt64BE(1);
      const walEnd = chunk.readBigUInt64BE(9);
      const payload = chunk.subarray(25);
      const message = decode(payload);
      if (walEnd > received) received = walEnd;
      if (walStart > received) received = walStart;
      options.onMessage(message, walStart, payload.length);
    } else if (kind === 0x6b /* k */) {
      const walEnd = chunk.readBigUInt64BE(1);
      const replyRequested = chunk.readUInt8(17) === 1;
      if (walEnd > received) received = walEnd;
      // Nothing in flight: everything up to walEnd was either delivered and acknowledged or
      // filtered out by the publication, so acknowledging it lets the server recycle WAL.
      let idleTarget = -1n;
      if (walEnd > durable && options.isIdle()) {
        const cap = options.idleLimit?.() ?? null;
        idleTarget = cap !== null && cap < walEnd ? cap : walEnd;
      }
      if (idleTarget > durable) {
        durable = idleTarget;
        sendStatus();
        if (replyRequested && walEnd > durable) noteUnanswerablePing(walEnd);
      } else if (replyRequested) {
        sendStatus();
        if (walEnd > durable) noteUnanswerablePing(walEnd);
      }
    }
    // Other CopyData kinds do not exist in the protocol for the primary's side; ignore them.
  }

  /**
   * A shutting-down walsender (`WalSndDone`) exits only once the reported flush position
   * reaches everything it sent, asking for a reply again and again meanwhile; it holds up
   * the server's shutdown checkpoint until then. While transactions are in flight we must
   * not report that position, so we hang up instead, let the server stop, and reconnect
   * (the unacknowledged transactions are re-sent). Normal operation sees a reply request
   * at most every wal_sender_timeout/2, never several within a second or two.
   */
  let pingRun = { walEnd: -1n, count: 0, since: 0 };
  function noteUnanswerablePing(walEnd: bigint): void {
    const now = Date.now();
    if (pingRun.walEnd !== walEnd || now - pingRun.since > SHUTDOWN_PING_WINDOW_MS) pingRun = { walEnd, count: 0, since: now };
    pingRun.count += 1;
    if (pingRun.count >= SHUTDOWN_PING_COUNT) {
      pingRun = { walEnd: -1n, count: 0, since: 0 };
      abortSession?.(Object.assign(new Error('the server is shutting down and waits for a flush position that is not durable yet; disconnecting to let it stop'), { code: '57P01' }));
    }
  }
  let abortSession: ((error: Error) => void) | null = null;

  async function runSession(): Promise<void> {
    const c = new pg.Client({ ...options.connection, replication: 'database' } as pg.ClientConfig);
    client = c;
    let sessionError: Error | null = null;
    let endSession: () => void = () => {};
    const ended = new Promise<void>((resolve) => {
      endSession = resolve;
      c.on('error', (error) => {
        sessionError ??= error;
        resolve();
      });
      c.on('end', () => resolve());
    });
    abortSession = (error) => {
      sessionError ??= error;
      endSession();
    };
    // pg quirk: `connect()` never settles when `end()` is called while it is connecting
    // (the connect callback is skipped when the client is ending), so race it with 'end'.
    const connected = await Promise.race([
      c.connect().then(
        () => null,
        (error: unknown) => toError(error),
      ),
      ended.then(() => sessionError ?? new Error('Connection terminated while connecting')),
    ]);
    if (connected) throw connected;
    if (closed) return;
    const identify = await c.query('IDENTIFY_SYSTEM');
    const row = identify.rows[0] as { systemid: string; timeline: string | number; dbname: string | null } | undefined;
    if (!row || !row.dbname) {
      throw new ReplicationError('SOURCE_REPLICATION_NOT_LOGICAL', 'IDENTIFY_SYSTEM returned no database: the connection must be a logical (database) replication connection');
    }
    const slotInfo = await c.query(
      `SELECT slot_type, plugin, database, wal_status, invalidation_reason, confirmed_flush_lsn::text AS confirmed_flush_lsn FROM pg_catalog.pg_replication_slots WHERE slot_name = ${quoteLiteral(options.slot)}`,
    );
    const slot = slotInfo.rows[0] as
      | { slot_type: string; plugin: string | null; database: string | null; wal_status: string | null; invalidation_reason: string | null; confirmed_flush_lsn: string | null }
      | undefined;
    if (!slot) {
      throw new ReplicationError('SOURCE_SLOT_MISSING', `replication slot "${options.slot}" does not exist; create it with: event-assembler setup --slot ${options.slot} … (or SELECT pg_create_logical_replication_slot('${options.slot}', 'pgoutput');)`, { slot: options.slot });
    }
    if (slot.wal_status === 'lost' || slot.invalidation_reason) {
      throw new ReplicationError(
        'SOURCE_SLOT_INVALIDATED',
        `replication slot "${options.slot}" was invalidated (${slot.invalidation_reason ?? 'wal_status = lost'}): the WAL it needs is gone, so capture cannot resume. Rebuild: create a new slot, take a new snapshot generation and reconcile; never restart silently`,
        { slot: options.slot, walStatus: slot.wal_status, invalidationReason: slot.invalidation_reason },
      );
    }
    const confirmed = slot.confirmed_flush_lsn ? parseLsn(slot.confirmed_flush_lsn) : 0n;
    // Never start from, or report, less than the slot already confirmed: the server would
    // start from confirmed_flush_lsn anyway, and a lower flush report is at best ignored.
    if (confirmed > durable) durable = confirmed;
    if (durable > received) received = durable;
    sessions += 1;
    session = {
      systemId: String(row.systemid),
      timeline: Number(row.timeline),
      database: row.dbname,
      startLsn: formatLsn(durable),
      confirmedFlushLsn: formatLsn(confirmed),
      number: sessions,
    };
    options.onSession(session);
    const decoder = createPgoutputDecoder();
    internals = (c as unknown as ClientInternals).connection;
    internals.on('copyData', ({ chunk }) => {
      if (closed || fatal) return;
      try {
        onCopyData(chunk, (payload) => decoder.decode(payload));
      } catch (error) {
        failFatal(toError(error));
      }
    });
    // Yield to other I/O every ~64 KiB: libuv reads a busy socket up to 32 times per turn, so a
    // backlog of WAL (2 MiB, ~4,000 small transactions) was decoded and mapped in one go while
    // the destination's answers waited — reading and appending then took turns instead of
    // overlapping (measured: the source paused for acknowledgements 60 % of the time).
    let sinceYield = 0;
    let yielding = false;
    const stream = internals.stream;
    stream.on('data', (chunk: Buffer) => {
      sinceYield += chunk.length;
      if (sinceYield < YIELD_BYTES || yielding || paused) return;
      sinceYield = 0;
      yielding = true;
      stream.pause();
      setImmediate(() => {
        yielding = false;
        if (!paused && !closed) stream.resume();
      });
    });
    internals.once('replicationStart', () => {
      streaming = true;
      attempt = 0;
      if (paused) internals?.stream.pause();
      sendStatus();
      statusTimer = setInterval(() => sendStatus(), options.statusIntervalMs);
    });
    const pluginOptions = [
      `proto_version ${quoteLiteral(String(options.protocolVersion))}`,
      `publication_names ${quoteLiteral(options.publications.map(quoteIdent).join(','))}`,
      `messages ${quoteLiteral(String(options.messages))}`,
    ];
    if (options.protocolVersion >= 2 && options.streaming) pluginOptions.push(`streaming 'on'`);
    const startSql = `START_REPLICATION SLOT ${quoteIdent(options.slot)} LOGICAL ${formatLsn(durable)} (${pluginOptions.join(', ')})`;
    const query = c.query(startSql).then(
      () => null,
      (error: unknown) => toError(error),
    );
    const outcome = await Promise.race([query, ended.then(() => sessionError)]);
    if (outcome) throw outcome;
    // The server finished the stream (shutdown): like a lost connection, reconnect.
    if (!closed) throw Object.assign(new Error('replication stream ended by the server'), { code: '08006' });
  }

  function cleanupConnection(): Promise<void> {
    streaming = false;
    abortSession = null;
    if (statusTimer) clearInterval(statusTimer);
    if (feedbackTimer) clearTimeout(feedbackTimer);
    statusTimer = null;
    feedbackTimer = null;
    internals = null;
    const c = client;
    client = null;
    if (!c) return Promise.resolve();
    c.removeAllListeners('error');
    c.on('error', () => {});
    return c.end().catch(() => {});
  }

  function failFatal(error: Error): void {
    if (fatal || closed) return;
    fatal = true;
    void cleanupConnection();
    options.onFatal(error);
  }

  function loop(): void {
    if (closed || fatal) return;
    running = runSession().then(
      () => {
        void cleanupConnection();
        if (!closed && !fatal) scheduleReconnect(new Error('replication stream ended'));
      },
      (error: unknown) => {
        void cleanupConnection();
        if (closed || fatal) return;
        const err = toError(error);
        if (err instanceof ReplicationError || !isRetryable(err) || attempt + 1 > options.backoff.maxAttempts) {
          failFatal(err);
        } else {
          scheduleReconnect(err);
        }
      },
    );
  }

  function scheduleReconnect(error: Error): void {
    const delay = backoffDelay(attempt, options.backoff);
    attempt += 1;
    reconnects += 1;
    options.onDisconnect?.(error, delay, attempt);
    reconnectTimer = setTimeout(() => {
      reconnectTimer = null;
      loop();
    }, delay);
  }

  return {
    start() {
      if (running || closed) return;
      loop();
    },
    confirm(lsn) {
      const position = parseLsn(lsn);
      if (position <= durable) return;
      durable = position;
      scheduleFeedback();
    },
    pause() {
      paused = true;
      internals?.stream.pause();
    },
    resume() {
      paused = false;
      internals?.stream.resume();
    },
    get paused() {
      return paused;
    },
    get connected() {
      return streaming;
    },
    get durableLsn() {
      return formatLsn(durable);
    },
    get receivedLsn() {
      return formatLsn(received);
    },
    get session() {
      return session;
    },
    get reconnects() {
      return reconnects;
    },
    async close() {
      if (closed) return;
      // Report the final durable position before hanging up.
      if (durable !== lastReported) sendStatus();
      closed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      reconnectTimer = null;
      await cleanupConnection();
      await running?.catch(() => {});
    },
  };
}
