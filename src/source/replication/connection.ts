/**
 * One replication connection, from connect to hang-up: a `pg` client in
 * `replication: 'database'` mode runs `IDENTIFY_SYSTEM`, checks the slot, starts
 * `START_REPLICATION … LOGICAL` at the durable position and then reads the CopyBoth
 * sub-protocol itself — XLogData decoded into pgoutput messages, keepalives and status updates
 * handed to the standby feedback (feedback.ts). Whether to connect again is the stream's
 * business (stream.ts), not this file's.
 */
import pg from 'pg';
import { createPgoutputDecoder, type PgoutputDecoder } from '../pgoutput/decoder.js';
import { connectSource } from '../connect-source.js';
import { listenCopyData } from '../copy-data.js';
import { formatLsn, parseLsn } from '../position.js';
import { ReplicationError, SlotActiveError, slotActivePid, toError, type SlotHolder } from './errors.js';
import { createStandbyFeedback, type ShutdownPingDetector } from './feedback.js';
import { querySlotHolder } from './slot-holder.js';
import type { ReplicationSession, ReplicationStreamOptions, WalPositions } from './types.js';
import { PRIMARY_KEEPALIVE, quoteLiteral, startReplicationSql, XLOG_DATA, XLOG_DATA_HEADER_BYTES } from './wire.js';

/** Bytes of replication data read between two yields to the event loop. */
const YIELD_BYTES = 64 * 1024;

interface ClientInternals {
  connection: {
    stream: NodeJS.ReadableStream & { pause(): void; resume(): void };
    on(event: 'copyData', listener: (message: { chunk: Buffer }) => void): void;
    once(event: 'replicationStart', listener: () => void): void;
    sendCopyFromChunk(chunk: Buffer): void;
  };
}

/** What a connection needs from the stream that opened it. */
export interface ConnectionContext {
  readonly options: ReplicationStreamOptions;
  /** Shared with the stream and the next connections. */
  readonly positions: WalPositions;
  readonly shutdownPings: ShutdownPingDetector;
  /** The stream was closed. */
  isClosed(): boolean;
  /** The stream was closed or failed: ignore what still arrives. */
  isStopped(): boolean;
  isPaused(): boolean;
  /** The number of the session about to start (1, 2, …). */
  nextSessionNumber(): number;
  /** This connection's walsender pid (`pg_backend_pid()`): remembered, so a slot still held by it is told from one held by another process. */
  ownWalsender(pid: number): void;
  /** Whether `pid` was the walsender of one of this stream's sessions. */
  isOwnWalsender(pid: number): boolean;
  /** A session begins (before START_REPLICATION): anything half-received from the previous one must be dropped. */
  onSession(session: ReplicationSession): void;
  /** Replication started: the server accepted START_REPLICATION. */
  onStreaming(): void;
  /** A message could not be decoded or handled: the stream cannot go on. */
  onFatal(error: Error): void;
}

export interface ReplicationConnection {
  /** Connects and reads until the connection ends; rejects with why (resolves only when the stream was closed). */
  run(): Promise<void>;
  sendStatus(): void;
  /** The durable position moved: report it soon. */
  scheduleFeedback(): void;
  pause(): void;
  resume(): void;
  /** Replication started and the connection has not ended. */
  readonly streaming: boolean;
  /** Stops the timers and ends the client. */
  end(): Promise<void>;
}

interface SlotRow {
  slot_type: string; plugin: string | null; database: string | null; wal_status: string | null; invalidation_reason: string | null; confirmed_flush_lsn: string | null;
  active_pid: number | null; own_pid: number;
}

/** IDENTIFY_SYSTEM: the cluster's identity and timeline; fails unless this is a logical (database) replication connection. */
async function identifySystem(client: pg.Client): Promise<{ systemid: string; timeline: string | number; dbname: string }> {
  const identify = await client.query('IDENTIFY_SYSTEM');
  const row = identify.rows[0] as { systemid: string; timeline: string | number; dbname: string | null } | undefined;
  if (!row || !row.dbname) {
    throw new ReplicationError('SOURCE_REPLICATION_NOT_LOGICAL', 'IDENTIFY_SYSTEM returned no database: the connection must be a logical (database) replication connection');
  }
  return { ...row, dbname: row.dbname };
}

/**
 * The slot's confirmed_flush_lsn; fails when the slot is missing or invalidated (history gone
 * means rebuild), and with SlotActiveError when another connection streams it (asked before
 * START_REPLICATION, so the holder's client is named; START_REPLICATION itself may still lose a
 * race, see `slotActive`). Remembers this connection's walsender pid.
 */
async function checkSlot(client: pg.Client, slotName: string, ctx: ConnectionContext): Promise<bigint> {
  const slotInfo = await client.query(
    `SELECT slot_type, plugin, database, wal_status, invalidation_reason, confirmed_flush_lsn::text AS confirmed_flush_lsn, active_pid, pg_backend_pid() AS own_pid
       FROM pg_catalog.pg_replication_slots WHERE slot_name = ${quoteLiteral(slotName)}`,
  );
  const slot = slotInfo.rows[0] as SlotRow | undefined;
  const durable = ctx.positions.durable;
  // A slot gone from under a stream that has a position: dropped, or a failover to a standby that
  // had no synchronized copy. (A slot ahead of the durable position is no such sign: another
  // assembler of the same checkpoint stream — a standby that led meanwhile — may have advanced it.)
  if (!slot && durable > 0n) throw slotGone(slotName, `does not exist on this server (${client.host}:${client.port}) — after a failover: the standby did not have it synchronized (failover = false, or no sync_replication_slots)`, durable);
  if (!slot) {
    throw new ReplicationError('SOURCE_SLOT_MISSING', `replication slot "${slotName}" does not exist; create it with: event-assembler setup --slot ${slotName} … (or SELECT pg_create_logical_replication_slot('${slotName}', 'pgoutput');)`, { slot: slotName });
  }
  if (slot.wal_status === 'lost' || slot.invalidation_reason) {
    throw new ReplicationError(
      'SOURCE_SLOT_INVALIDATED',
      `replication slot "${slotName}" was invalidated (${slot.invalidation_reason ?? 'wal_status = lost'}): the WAL it needs is gone, so capture cannot resume. Rebuild: start the assembler with snapshot.mode 'when_needed' (a new slot and a new snapshot generation; docs/runbook.md, EventAssemblerSlotLost) and reconcile; never restart silently`,
      { slot: slotName, walStatus: slot.wal_status, invalidationReason: slot.invalidation_reason },
    );
  }
  ctx.ownWalsender(Number(slot.own_pid));
  if (slot.active_pid !== null) {
    const holder = await querySlotHolder(client, slotName, ctx.isOwnWalsender).catch(() => null);
    throw new SlotActiveError(slotName, holder ?? { pid: Number(slot.active_pid), client: null, applicationName: null, ours: ctx.isOwnWalsender(Number(slot.active_pid)) });
  }
  return slot.confirmed_flush_lsn ? parseLsn(slot.confirmed_flush_lsn) : 0n;
}

/**
 * The slot this stream was reading cannot serve its durable position any more (REBUILD_NEEDED,
 * `run` exits 3): continuing would start from "now" and skip what was committed in between.
 */
function slotGone(slotName: string, what: string, durable: bigint): ReplicationError {
  return new ReplicationError(
    'REBUILD_NEEDED',
    `replication slot "${slotName}" ${what}. Capture cannot resume at ${formatLsn(durable)} without a gap. Rebuild: start the assembler with snapshot.mode 'when_needed' — it re-creates the slot and reads every captured table as a new snapshot generation (docs/runbook.md, EventAssemblerSlotLost) — and reconcile the consumers`,
    { slot: slotName, durableLsn: formatLsn(durable) },
  );
}

/** START_REPLICATION's refusal of a slot another connection took since the check: a SlotActiveError naming it (else `error`). */
async function slotActive(client: pg.Client, slotName: string, error: Error, ctx: ConnectionContext): Promise<Error> {
  const pid = slotActivePid(error);
  if (pid === null) return error;
  const holder: SlotHolder = (await querySlotHolder(client, slotName, ctx.isOwnWalsender).catch(() => null)) ?? { pid, client: null, applicationName: null, ours: ctx.isOwnWalsender(pid) };
  return new SlotActiveError(slotName, holder);
}

/**
 * Yield to other I/O every ~64 KiB: libuv reads a busy socket up to 32 times per turn, so a
 * backlog of WAL (2 MiB, ~4,000 small transactions) was decoded and mapped in one go while
 * the destination's answers waited — reading and appending then took turns instead of
 * overlapping (measured: the source paused for acknowledgements 60 % of the time).
 */
function yieldEvery(stream: ClientInternals['connection']['stream'], ctx: ConnectionContext): void {
  let sinceYield = 0;
  let yielding = false;
  stream.on('data', (chunk: Buffer) => {
    sinceYield += chunk.length;
    if (sinceYield < YIELD_BYTES || yielding || ctx.isPaused()) return;
    sinceYield = 0;
    yielding = true;
    stream.pause();
    setImmediate(() => {
      yielding = false;
      if (!ctx.isPaused() && !ctx.isClosed()) stream.resume();
    });
  });
}

export function openReplicationConnection(ctx: ConnectionContext): ReplicationConnection {
  const { options, positions } = ctx;
  let client: pg.Client | null = null;
  const connecting = new AbortController();
  let internals: ClientInternals['connection'] | null = null;
  let sessionError: Error | null = null;
  let endSession: () => void = () => {};
  let abortSession: ((error: Error) => void) | null = (error) => {
    sessionError ??= error;
    endSession();
  };
  const feedback = createStandbyFeedback({
    positions,
    statusIntervalMs: options.statusIntervalMs,
    feedbackDelayMs: options.feedbackDelayMs,
    send: (message) => internals!.sendCopyFromChunk(message),
    isIdle: () => options.isIdle(),
    idleLimit: () => options.idleLimit?.() ?? null,
    shutdownPings: ctx.shutdownPings,
    onShutdownWait: (error) => abortSession?.(error),
  });
  const ended = new Promise<void>((resolve) => (endSession = resolve));
  /** The connection's end (an error, the server hanging up, or end()) settles `ended`. */
  function watch(c: pg.Client): void {
    c.on('error', (error) => {
      sessionError ??= error;
      endSession();
    });
    c.on('end', () => endSession());
  }

  /** One CopyData message: bytes `start` … `end - 1` of `chunk`. */
  function onCopyData(chunk: Buffer, start: number, end: number, decoder: PgoutputDecoder): void {
    const kind = chunk[start];
    if (kind === XLOG_DATA) {
      const walStart = chunk.readBigUInt64BE(start + 1);
      const walEnd = chunk.readBigUInt64BE(start + 9);
      // The payload decoded in place (no view of it per message).
      const message = decoder.decodeAt(chunk, start + XLOG_DATA_HEADER_BYTES, end);
      if (walEnd > positions.received) positions.received = walEnd;
      if (walStart > positions.received) positions.received = walStart;
      options.onMessage(message, walStart, end - start - XLOG_DATA_HEADER_BYTES);
    } else if (kind === PRIMARY_KEEPALIVE) {
      feedback.keepalive(chunk.readBigUInt64BE(start + 1), chunk[start + 17] === 1);
    }
    // Other CopyData kinds do not exist in the protocol for the primary's side; ignore them.
  }

  /** IDENTIFY_SYSTEM and the slot check passed: the session begins at the durable position. */
  function beginSession(row: { systemid: string; timeline: string | number; dbname: string }, confirmed: bigint, server: string): ReplicationSession {
    // Never start from, or report, less than the slot already confirmed: the server would
    // start from confirmed_flush_lsn anyway, and a lower flush report is at best ignored.
    if (confirmed > positions.durable) positions.durable = confirmed;
    if (positions.durable > positions.received) positions.received = positions.durable;
    return {
      systemId: String(row.systemid),
      timeline: Number(row.timeline),
      database: row.dbname,
      startLsn: formatLsn(positions.durable),
      confirmedFlushLsn: formatLsn(confirmed),
      number: ctx.nextSessionNumber(),
      server,
    };
  }

  /** Called right before START_REPLICATION is sent: pg's parser holds nothing of an earlier reply. */
  function listen(connection: ClientInternals['connection']): void {
    const decoder = createPgoutputDecoder();
    const handle = (chunk: Buffer, start: number, end: number): void => {
      if (ctx.isStopped()) return;
      try {
        onCopyData(chunk, start, end, decoder);
      } catch (error) {
        ctx.onFatal(toError(error));
      }
    };
    // The CopyData messages straight off the socket (copy-data.ts); pg's own events where that cannot be set up.
    listenCopyData(connection, handle);
    yieldEvery(connection.stream, ctx);
    connection.once('replicationStart', () => {
      ctx.onStreaming();
      if (ctx.isPaused()) internals?.stream.pause();
      feedback.start();
    });
  }

  return {
    async run() {
      // The host walk (several hosts: the first primary); end() meanwhile aborts it — pg's
      // `connect()` never settles when `end()` is called while it is connecting.
      const connected = await connectSource(options.connection, { extra: { replication: 'database' }, signal: connecting.signal }).then(
        (c) => c,
        (error: unknown) => toError(error),
      );
      if (connected instanceof Error) throw connected;
      client = connected;
      watch(client);
      if (ctx.isClosed() || connecting.signal.aborted) {
        await client.end().catch(() => undefined); // end() ran while the walk finished: nothing else ends it
        return;
      }
      const row = await identifySystem(client);
      const confirmed = await checkSlot(client, options.slot, ctx);
      ctx.onSession(beginSession(row, confirmed, `${client.host}:${client.port}`));
      internals = (client as unknown as ClientInternals).connection;
      listen(internals);
      const query = client.query(startReplicationSql(options, positions.durable)).then(
        () => null,
        (error: unknown) => toError(error),
      );
      const outcome = await Promise.race([query, ended.then(() => sessionError)]);
      if (outcome) throw await slotActive(client, options.slot, outcome, ctx);
      // The server finished the stream (shutdown): like a lost connection, reconnect.
      if (!ctx.isClosed()) throw Object.assign(new Error('replication stream ended by the server'), { code: '08006' });
    },
    sendStatus: () => feedback.sendStatus(),
    scheduleFeedback: () => feedback.schedule(),
    pause() {
      internals?.stream.pause();
    },
    resume() {
      internals?.stream.resume();
    },
    get streaming() {
      return feedback.streaming;
    },
    end() {
      feedback.stop();
      abortSession = null;
      internals = null;
      connecting.abort();
      endSession();
      if (!client) return Promise.resolve();
      client.removeAllListeners('error');
      client.on('error', () => {});
      return client.end().catch(() => {});
    },
  };
}
