/**
 * The PostgreSQL source: start-up checks, the replication stream and the transaction intake
 * wired together behind the stage's interface — PostgreSQL logical replication in, complete
 * committed transactions out, acknowledged by the consumer.
 *
 * ```ts
 * const source = createPostgresSource({ connection, slot, publication, tables });
 * for await (const tx of source.transactions()) {
 *   await handOff(tx);            // durably downstream (KurrentDB)
 *   source.acknowledge(tx);       // only now may the slot forget it
 *   await tx.release();
 * }
 * ```
 *
 * Acknowledgement is cumulative: `acknowledge(tx)` declares `tx` and every transaction
 * received before it durable. The slot's confirmed_flush_lsn never moves past that point;
 * after a crash the server re-sends everything not acknowledged (replays are expected).
 *
 * Within one source instance each transaction is handed out once: after a lost connection
 * the reader resumes at the durable position, the server re-sends what was not acknowledged,
 * and copies of transactions already taken in (queued or handed out, still awaiting their
 * acknowledgement) are dropped. A new instance (a restart) gets every unacknowledged one again.
 */
import type pg from 'pg';
import { createTransactionBuffer, type CommittedTransaction, type TransactionBuffer } from '../buffer/index.js';
import { EventAssemblerError } from '../errors.js';
import { flowChange, type FlowLimits } from './backpressure.js';
import { connectSource } from './connect-source.js';
import { runStartupChecks, type CapturedTable, type StartupCheckReport } from './checks.js';
import { createMessageOrder } from './message-order.js';
import type { RelationMessage } from './pgoutput/messages.js';
import { makeSourcePosition, parseLsn } from './position.js';
import { createRelationRegistry, type RelationRegistry } from './relations.js';
import { createReplicationStream, type ReplicationSession, type ReplicationStream } from './replication.js';
import { parsePostgresSourceOptions, SourceConfigError, type ParsedOptions, type PostgresSourceOptions } from './source-options.js';
import { createTransactionIntake } from './transaction-intake.js';
import type { Lsn, QualifiedTable, SourcePosition } from './types.js';

/** `waiting-for-slot`: another connection streams the slot (a standby, or a lost connection of ours PostgreSQL has not ended yet). */
export type SourceState = 'new' | 'starting' | 'streaming' | 'reconnecting' | 'waiting-for-slot' | 'failed' | 'closed';

export interface SourceStatus {
  readonly state: SourceState;
  /** Highest WAL position seen from the server. */
  readonly receivedLsn: Lsn;
  /** What the slot is told is durable (never more than downstream acknowledged, or an idle keepalive position). */
  readonly durableLsn: Lsn;
  /** Committed transactions received and not yet acknowledged (queued or handed out). */
  readonly inFlightTransactions: number;
  readonly inFlightBytes: number;
  /** Transactions begun (or streamed) and not yet committed. */
  readonly openTransactions: number;
  /**
   * Messages received and not yet taken in: the buffer waits for its disk (a spilled
   * transaction's commit while its spill file is finished, for one). The received position may
   * already be past them (see {@link isSourceIdle}).
   */
  readonly pendingMessages: number;
  readonly paused: boolean;
  readonly reconnects: number;
  /** Estimated bytes of decoded changes the transaction buffer holds in memory. */
  readonly bufferMemoryBytes: number;
  /** Bytes in spill files now (large transactions on disk). */
  readonly spilledBytes: number;
  /** Transactions spilled to disk since start. */
  readonly spilledTransactions: number;
  readonly systemId: string | null;
  readonly timeline: number | null;
  readonly lastError: Error | null;
}

/**
 * Nothing received waits to become durable: no message waiting to be taken in, no transaction
 * open or in flight. The one test of idleness — the keepalive acknowledgement and the idle
 * checkpoint take a received position as durable only then.
 */
export function isSourceIdle(s: Pick<SourceStatus, 'pendingMessages' | 'inFlightTransactions' | 'openTransactions'>): boolean {
  return s.pendingMessages === 0 && s.inFlightTransactions === 0 && s.openTransactions === 0;
}

export interface PostgresSource {
  /** Runs the start-up checks and starts streaming. Called by `transactions()` when needed. */
  start(): Promise<StartupCheckReport | null>;
  /** Resolves once a session first streams (the server accepted START_REPLICATION) or the source closed; rejects with a fatal error. */
  streaming(): Promise<void>;
  /** Complete transactions in commit order. One consumer. Ends after `close()`; throws on a fatal error. */
  transactions(): AsyncIterable<CommittedTransaction>;
  /**
   * The next transaction if one is queued now, else `null` (then wait with `transactions()`).
   * For the same consumer, between — never during — its waits on the iterator: a queue of
   * transactions is taken without a promise each.
   */
  takeNow(): CommittedTransaction | null;
  /** `tx` (or everything up to the end LSN) is durable downstream; so is every earlier transaction. */
  acknowledge(target: Pick<CommittedTransaction, 'endLsn'> | Lsn): void;
  status(): SourceStatus;
  /** The relation registry (current table shapes). */
  readonly relations: RelationRegistry;
  close(): Promise<void>;
}

/** Pending pushes into the buffer (messages decoded but not yet grouped) before reading pauses. */
const MAX_PENDING_MESSAGES = 10_000;

/** The start-up checks (tables, replica identity, slot, publication) and the status interval against wal_sender_timeout. */
async function checkBeforeStreaming(connection: pg.ClientConfig, config: ParsedOptions & { tables: CapturedTable[] }, publications: readonly string[]): Promise<StartupCheckReport> {
  const client = await connectSource(connection);
  try {
    const report = await runStartupChecks(client, { slot: config.slot, publications, tables: config.tables });
    // The walsender drops a standby that stays silent for wal_sender_timeout; status
    // updates are what keeps a paused (backpressured) reader connected.
    const { rows } = await client.query(`SELECT setting::bigint AS ms FROM pg_catalog.pg_settings WHERE name = 'wal_sender_timeout'`);
    const timeoutMs = Number((rows[0] as { ms?: string } | undefined)?.ms ?? 0);
    if (timeoutMs > 0 && config.statusIntervalMs > timeoutMs / 2) {
      throw new SourceConfigError(
        'statusIntervalMs',
        `${config.statusIntervalMs} ms is not well below the server's wal_sender_timeout (${timeoutMs} ms): the server could end the connection between two status updates — ` +
          `fix: use at most ${Math.floor(timeoutMs / 2)} ms (source.statusIntervalMs in the assembler's configuration), or raise wal_sender_timeout`,
      );
    }
    return report;
  } finally {
    await client.end().catch(() => {});
  }
}

function bufferFields(usage: { memoryBytes: number; spilledBytes: number; spills: number }) {
  return { bufferMemoryBytes: usage.memoryBytes, spilledBytes: usage.spilledBytes, spilledTransactions: usage.spills };
}

export function createPostgresSource(options: PostgresSourceOptions): PostgresSource {
  const config = parsePostgresSourceOptions(options);
  const connection: pg.ClientConfig = typeof config.connection === 'string' ? { connectionString: config.connection } : (config.connection as pg.ClientConfig);
  const publications = typeof config.publication === 'string' ? [config.publication] : config.publication;
  const capturedTables = options.tables.map((t) => (typeof t === 'string' ? t : t.table));
  const relations = createRelationRegistry({ captured: capturedTables });
  for (const t of options.tables) {
    if (typeof t !== 'string' && t.requiredColumns?.length) relations.requireColumns(t.table, t.requiredColumns);
  }
  const limits: FlowLimits = { maxInFlightTransactions: config.maxInFlightTransactions, maxInFlightBytes: config.maxInFlightBytes, maxPendingMessages: MAX_PENDING_MESSAGES };

  let state: SourceState = 'new';
  let session: ReplicationSession | null = null;
  let fatalError: Error | null = null;
  let lastError: Error | null = null;
  let started: Promise<StartupCheckReport | null> | null = null;
  let closing: Promise<void> | null = null;
  let wake: (() => void) | null = null;
  let streamed: { resolve(): void; reject(error: Error): void } | null = null;
  const firstStreaming = new Promise<void>((resolve, reject) => (streamed = { resolve, reject }));
  firstStreaming.catch(() => undefined); // reported through transactions() too

  const makePosition = (commitLsn: Lsn, xid: number): SourcePosition => {
    if (!session) throw new Error('no replication session');
    return makeSourcePosition({ systemId: session.systemId, timeline: session.timeline, slot: config.slot, commitLsn, xid });
  };
  const signal = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const intake = createTransactionIntake({
    newBuffer: (): TransactionBuffer =>
      createTransactionBuffer({ memoryLimitBytes: config.memoryLimitBytes, makePosition, relations, ...(config.spillDir ? { spillDir: config.spillDir } : {}) }),
    onMessage: (message, walStart) => options.onMessage?.(message, walStart),
    onQueued: signal,
  });

  function fail(error: Error): void {
    if (fatalError || state === 'closed') return;
    fatalError = error;
    lastError = error;
    state = 'failed';
    streamed?.reject(error);
    void reader.close();
    signal();
  }

  function failWith(error: unknown): void {
    fail(error instanceof Error ? error : new Error(String(error)));
  }

  const captured = new Set(capturedTables);
  const uncaptured = new Set<QualifiedTable>();
  /** pgoutput describes a table before its first change in a session: one that is not captured joined the publication meanwhile. */
  function noteRelation(message: RelationMessage): void {
    const table = `${message.schema}.${message.name}`;
    if (captured.has(table) || uncaptured.has(table)) return;
    uncaptured.add(table);
    options.onUncapturedTable?.(table);
  }

  function updateFlow(): void {
    const change = flowChange(reader.paused, intake.inFlightTransactions, intake.inFlightBytes, order.pending, limits);
    if (change === 'pause') reader.pause();
    else if (change === 'resume') reader.resume();
  }

  const order = createMessageOrder({
    take: (message, walStart, size) => {
      if (message.tag === 'relation') noteRelation(message);
      return intake.take(message, walStart, size);
    },
    failed: () => fatalError !== null,
    onError: failWith,
    onFlowCheck: updateFlow,
    maxPending: MAX_PENDING_MESSAGES,
  });

  const reader: ReplicationStream = createReplicationStream({
    connection,
    slot: config.slot,
    publications,
    protocolVersion: config.protocolVersion,
    streaming: config.streaming,
    messages: config.messages,
    statusIntervalMs: config.statusIntervalMs,
    feedbackDelayMs: config.feedbackDelayMs,
    backoff: config.backoff,
    slotPollIntervalMs: config.slotPollIntervalMs,
    ...(config.startLsn ? { startLsn: config.startLsn } : {}),
    onSession(s) {
      if (session && s.systemId !== session.systemId) {
        fail(new EventAssemblerError('SOURCE_SYSTEM_CHANGED', `the server's system identifier changed from ${session.systemId} to ${s.systemId}: this is a different database cluster, refusing to continue`, { before: session.systemId, after: s.systemId, slot: config.slot }));
        return;
      }
      const previous = session;
      session = s;
      state = 'streaming';
      options.onSession?.(s, previous);
      // Queued (and pending): nothing is taken in on the hot path (message-order.ts) before the reset ran.
      order.after(() => {
        intake.resetForSession();
        return undefined;
      });
    },
    onMessage: (message, walStart, size) => order.push(message, walStart, size),
    isIdle() {
      return isSourceIdle({ pendingMessages: order.pending, inFlightTransactions: intake.inFlightTransactions, openTransactions: intake.openTransactions });
    },
    idleLimit() {
      const limit = options.idleAcknowledgeLimit?.() ?? null;
      return limit === null ? null : parseLsn(limit);
    },
    onStreaming() {
      if (state !== 'closed' && state !== 'failed') state = 'streaming';
      streamed?.resolve();
    },
    onSlotActive(error, delayMs) {
      lastError = error;
      if (state !== 'closed' && state !== 'failed') state = 'waiting-for-slot';
      options.onSlotActive?.(error.holder, delayMs);
    },
    onDisconnect(error, delayMs, attempt) {
      lastError = error;
      if (state !== 'closed' && state !== 'failed') state = 'reconnecting';
      options.onReconnect?.(error, delayMs, attempt);
    },
    onFatal: fail,
  });

  async function start(): Promise<StartupCheckReport | null> {
    if (started) return started;
    state = 'starting';
    started = (async () => {
      const report = config.checks ? await checkBeforeStreaming(connection, config, publications) : null;
      if ((state as SourceState) === 'closed') return report;
      reader.start();
      return report;
    })();
    started.catch(failWith);
    return started;
  }

  return {
    start,
    streaming: () => firstStreaming,
    relations,
    async *transactions() {
      void start().catch(() => {});
      while (true) {
        const next = intake.shift();
        if (next) {
          yield next;
          continue;
        }
        if (fatalError) throw fatalError;
        if (state === 'closed') return;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    },
    takeNow() {
      if (fatalError || state === 'closed') return null;
      return intake.shift() ?? null;
    },
    acknowledge(target) {
      const lsn = typeof target === 'string' ? target : target.endLsn;
      intake.acknowledge(lsn);
      reader.confirm(lsn);
      updateFlow();
    },
    status() {
      return {
        state,
        receivedLsn: reader.receivedLsn,
        durableLsn: reader.durableLsn,
        inFlightTransactions: intake.inFlightTransactions,
        inFlightBytes: intake.inFlightBytes,
        openTransactions: intake.openTransactions,
        pendingMessages: order.pending,
        paused: reader.paused,
        reconnects: reader.reconnects,
        ...bufferFields(intake.bufferUsage()),
        systemId: session?.systemId ?? null,
        timeline: session?.timeline ?? null,
        lastError,
      };
    },
    close() {
      closing ??= (async () => {
        if (state !== 'failed') state = 'closed';
        streamed?.resolve();
        signal();
        await reader.close();
        await order.drained();
        await started?.catch(() => {});
        await intake.close();
        state = fatalError ? 'failed' : 'closed';
        signal();
      })();
      return closing;
    },
  };
}
