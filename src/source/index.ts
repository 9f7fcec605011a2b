/**
 * Stage `source/`: PostgreSQL logical replication in, complete committed transactions out.
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
import pg from 'pg';
import { z } from 'zod';
import { createTransactionBuffer, type CommittedTransaction, type NonTransactionalMessage, type TransactionBuffer } from '../buffer/index.js';
import { EventAssemblerError } from '../errors.js';
import { runStartupChecks, type CapturedTable, type StartupCheckReport } from './checks.js';
import type { PgoutputMessage } from './pgoutput/messages.js';
import { formatLsn, isLsn, makeSourcePosition, parseLsn, ZERO_LSN } from './position.js';
import { createRelationRegistry, type RelationRegistry } from './relations.js';
import { createReplicationStream, DEFAULT_BACKOFF, type ReplicationSession, type ReplicationStream } from './replication.js';
import type { Lsn, MessageChange, SourcePosition } from './types.js';

export type { CommittedTransaction, NonTransactionalMessage } from '../buffer/index.js';

/** Source options are invalid; `field` names the option (dotted path). */
export class SourceConfigError extends EventAssemblerError {
  readonly field: string;
  constructor(field: string, message: string) {
    super('SOURCE_CONFIG_INVALID', `invalid source option "${field}": ${message}`, { field });
    this.field = field;
  }
}

const MiB = 1024 * 1024;

const tableSchema = z.union([
  z.string(),
  z.object({
    table: z.string(),
    needsOldValues: z.boolean().optional(),
    requiredColumns: z.array(z.string().min(1)).optional(),
  }),
]);

const connectionSchema = z.union([
  z.string().min(1, 'a connection string such as postgres://capture@host:5432/db'),
  z.looseObject({
    host: z.string().optional(),
    port: z.number().int().positive().optional(),
    database: z.string().optional(),
    user: z.string().optional(),
    password: z.unknown().optional(),
  }),
]);

const optionsSchema = z.object({
  connection: connectionSchema,
  slot: z.string().regex(/^[a-z0-9_]{1,63}$/, 'slot names are lower-case letters, digits and _ (at most 63)'),
  publication: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
  tables: z.array(tableSchema).min(1, 'list at least one schema-qualified table'),
  protocolVersion: z.union([z.literal(1), z.literal(2)]).default(2),
  streaming: z.boolean().default(true),
  messages: z.boolean().default(true),
  checks: z.boolean().default(true),
  startLsn: z.string().refine(isLsn, 'an LSN such as 0/1A2B3C').optional(),
  maxInFlightTransactions: z.number().int().positive().default(1000),
  maxInFlightBytes: z.number().int().positive().default(64 * MiB),
  memoryLimitBytes: z.number().int().positive().default(64 * MiB),
  spillDir: z.string().min(1).optional(),
  statusIntervalMs: z.number().int().min(100).max(3_600_000).default(10_000),
  feedbackDelayMs: z.number().int().min(0).max(60_000).default(50),
  backoff: z
    .object({
      initialMs: z.number().int().min(1).default(DEFAULT_BACKOFF.initialMs),
      maxMs: z.number().int().min(1).default(DEFAULT_BACKOFF.maxMs),
      multiplier: z.number().min(1).default(DEFAULT_BACKOFF.multiplier),
      jitter: z.number().min(0).max(1).default(DEFAULT_BACKOFF.jitter),
      maxAttempts: z.number().int().positive().or(z.literal(Number.POSITIVE_INFINITY)).default(DEFAULT_BACKOFF.maxAttempts),
    })
    .default({ ...DEFAULT_BACKOFF }),
});

export interface PostgresSourceTable {
  /** `schema.table`. */
  readonly table: string;
  /** Mappers need whole old rows on update/delete ⇒ REPLICA IDENTITY FULL is required. Default: false. */
  readonly needsOldValues?: boolean;
  /** Columns mappers read: dropping, renaming or retyping one stops capture loudly. Default: none. */
  readonly requiredColumns?: readonly string[];
}

export interface PostgresSourceOptions {
  /** Connection of the capture role (LOGIN REPLICATION + SELECT): a connection string or `pg` settings. */
  readonly connection: string | pg.ClientConfig;
  /** Logical replication slot (pgoutput), created by `event-assembler setup`. */
  readonly slot: string;
  /** Publication name(s); together they must contain exactly `tables`. */
  readonly publication: string | readonly string[];
  /** Captured tables: `schema.table` or an object with requirements. */
  readonly tables: readonly (string | PostgresSourceTable)[];
  /** pgoutput protocol version. Default: 2 (1 only when asked: no streaming of large transactions). */
  readonly protocolVersion?: 1 | 2;
  /** Let the server stream large in-progress transactions (protocol 2). Default: true. */
  readonly streaming?: boolean;
  /** Receive `pg_logical_emit_message` messages. Default: true. */
  readonly messages?: boolean;
  /** Run the start-up checks (tables, replica identity, slot, publication). Default: true. */
  readonly checks?: boolean;
  /** Start position when it is ahead of the slot's confirmed_flush_lsn. Default: the slot's confirmed_flush_lsn. */
  readonly startLsn?: Lsn;
  /** Received-but-unacknowledged transactions before reading pauses. Default: 1000. */
  readonly maxInFlightTransactions?: number;
  /** Received-but-unacknowledged pgoutput bytes before reading pauses. Default: 64 MiB. */
  readonly maxInFlightBytes?: number;
  /** In-memory bytes of open transactions before the buffer spills to disk. Default: 64 MiB. */
  readonly memoryLimitBytes?: number;
  /** Directory for spill files. Default: the OS temp directory. */
  readonly spillDir?: string;
  /** Standby status update period, well below `wal_sender_timeout`. Default: 10 000 ms. */
  readonly statusIntervalMs?: number;
  /** Delay to coalesce acknowledgements into one status update. Default: 50 ms. */
  readonly feedbackDelayMs?: number;
  /** Reconnect backoff. Defaults: initialMs 500, maxMs 30 000, multiplier 2, jitter 0.5, maxAttempts unlimited. */
  readonly backoff?: Partial<{ initialMs: number; maxMs: number; multiplier: number; jitter: number; maxAttempts: number }>;
  /** Non-transactional logical messages (`pg_logical_emit_message(false, …)`), as they arrive. Default: ignored. */
  readonly onMessage?: (message: MessageChange, walStart: Lsn) => void;
  /**
   * While idle (nothing in flight) the source acknowledges keepalive positions so the slot does
   * not pin WAL; this caps that position, e.g. at what the pipeline has recorded in its
   * checkpoint stream, so the slot never gets ahead of the destination's record. Default: no cap.
   */
  readonly idleAcknowledgeLimit?: () => Lsn | null;
  /** Told about each lost connection and the delay before the next attempt. Default: none. */
  readonly onReconnect?: (error: Error, delayMs: number, attempt: number) => void;
}

export type SourceState = 'new' | 'starting' | 'streaming' | 'reconnecting' | 'failed' | 'closed';

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
  readonly paused: boolean;
  readonly reconnects: number;
  readonly systemId: string | null;
  readonly timeline: number | null;
  readonly lastError: Error | null;
}

export interface PostgresSource {
  /** Runs the start-up checks and starts streaming. Called by `transactions()` when needed. */
  start(): Promise<StartupCheckReport | null>;
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

type ParsedOptions = z.infer<typeof optionsSchema>;

/** Validates options; throws {@link SourceConfigError} naming the first bad field. */
export function parsePostgresSourceOptions(options: PostgresSourceOptions): ParsedOptions & { tables: CapturedTable[] } {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.length ? issue.path.map(String).join('.') : '(options)';
    throw new SourceConfigError(field, issue?.message ?? 'invalid');
  }
  const tables: CapturedTable[] = parsed.data.tables.map((t, i) => {
    const table = typeof t === 'string' ? t : t.table;
    if (!/^[^.]+\.[^.]+$/.test(table)) throw new SourceConfigError(`tables.${i}`, `"${table}" must be schema-qualified, e.g. public.${table}`);
    return typeof t === 'string' ? { table } : { table, needsOldValues: t.needsOldValues ?? false };
  });
  if (parsed.data.streaming && parsed.data.protocolVersion < 2) {
    throw new SourceConfigError('streaming', 'streaming needs protocolVersion 2; set streaming: false to use protocol 1');
  }
  return { ...parsed.data, tables };
}

interface InFlight {
  readonly endLsn: bigint;
  readonly bytes: number;
}

/** Pending pushes into the buffer (messages decoded but not yet grouped) before reading pauses. */
const MAX_PENDING_MESSAGES = 10_000;

export function createPostgresSource(options: PostgresSourceOptions): PostgresSource {
  const config = parsePostgresSourceOptions(options);
  const connection: pg.ClientConfig = typeof config.connection === 'string' ? { connectionString: config.connection } : (config.connection as pg.ClientConfig);
  const publications = typeof config.publication === 'string' ? [config.publication] : config.publication;
  const relations = createRelationRegistry();
  for (const t of options.tables) {
    if (typeof t !== 'string' && t.requiredColumns?.length) relations.requireColumns(t.table, t.requiredColumns);
  }

  let state: SourceState = 'new';
  let session: ReplicationSession | null = null;
  let fatalError: Error | null = null;
  let lastError: Error | null = null;
  let started: Promise<StartupCheckReport | null> | null = null;
  let closing: Promise<void> | null = null;

  const queue: CommittedTransaction[] = [];
  let wake: (() => void) | null = null;
  const inFlight: InFlight[] = [];
  let inFlightBytes = 0;
  /** End LSN of the last complete transaction taken in: replays after a reconnect at or below it are dropped. */
  let lastTakenEnd = -1n;
  let pending = 0;
  let chain: Promise<void> = Promise.resolve();
  let openXid: number | null = null;
  const openBytes = new Map<number, number>();
  const retiredBuffers: TransactionBuffer[] = [];

  const makePosition = (commitLsn: Lsn, xid: number): SourcePosition => {
    if (!session) throw new Error('no replication session');
    return makeSourcePosition({ systemId: session.systemId, timeline: session.timeline, slot: config.slot, commitLsn, xid });
  };
  const newBuffer = (): TransactionBuffer =>
    createTransactionBuffer({ memoryLimitBytes: config.memoryLimitBytes, makePosition, relations, ...(config.spillDir ? { spillDir: config.spillDir } : {}) });
  let buffer = newBuffer();

  const signal = () => {
    const w = wake;
    wake = null;
    w?.();
  };

  function fail(error: Error): void {
    if (fatalError || state === 'closed') return;
    fatalError = error;
    lastError = error;
    state = 'failed';
    void reader.close();
    signal();
  }

  /**
   * Backpressure with hysteresis: pause at a limit, resume only once well below it (¾ of each
   * limit, half the pending messages) — pausing and resuming the socket on every transaction
   * acknowledged at the limit was the top of the source's profile.
   */
  function updateFlow(): void {
    if (!reader.paused) {
      if (inFlight.length >= config.maxInFlightTransactions || inFlightBytes >= config.maxInFlightBytes || pending >= MAX_PENDING_MESSAGES) reader.pause();
    } else if (inFlight.length <= config.maxInFlightTransactions * 0.75 && inFlightBytes <= config.maxInFlightBytes * 0.75 && pending <= MAX_PENDING_MESSAGES / 2) {
      reader.resume();
    }
  }

  function trackBytes(message: PgoutputMessage, size: number): void {
    switch (message.tag) {
      case 'begin':
        openXid = message.xid;
        openBytes.set(message.xid, size);
        return;
      case 'stream-start':
        openXid = message.xid;
        openBytes.set(message.xid, (openBytes.get(message.xid) ?? 0) + size);
        return;
      case 'stream-stop':
        openXid = null;
        return;
      case 'stream-abort':
        if (message.xid === message.subXid) openBytes.delete(message.xid);
        return;
      default:
        if (openXid !== null) openBytes.set(openXid, (openBytes.get(openXid) ?? 0) + size);
    }
  }

  /**
   * Takes one message in: into the buffer, and what completes into the queue. Synchronous when
   * the buffer need not wait for the disk (nearly always); otherwise a promise of the same.
   */
  function take(message: PgoutputMessage, walStart: bigint, size: number): Promise<void> | undefined {
    trackBytes(message, size);
    // The buffer reads walStart only for a non-transactional logical message (it is delivered at once, with it).
    const result = buffer.pushNow(message, message.tag === 'message' ? formatLsn(walStart) : ZERO_LSN);
    return result instanceof Promise ? result.then((r) => taken(message, r, size)) : taken(message, result, size);
  }

  function taken(message: PgoutputMessage, result: CommittedTransaction | NonTransactionalMessage | null, size: number): Promise<void> | undefined {
    if (message.tag === 'commit') openXid = null;
    if (!result) return undefined;
    if (result.kind === 'message') {
      options.onMessage?.(result.message, result.walStart);
      return undefined;
    }
    const tx = result;
    const bytes = openBytes.get(tx.xid) ?? size;
    openBytes.delete(tx.xid);
    const end = parseLsn(tx.endLsn);
    if (end <= lastTakenEnd) {
      // Re-sent after a reconnect, and already taken in by this process: drop the copy.
      return tx.release();
    }
    lastTakenEnd = end;
    inFlight.push({ endLsn: end, bytes });
    inFlightBytes += bytes;
    queue.push(tx);
    signal();
    return undefined;
  }

  function failWith(error: unknown): void {
    fail(error instanceof Error ? error : new Error(String(error)));
  }

  /** Runs `work` after everything queued before it; a message counts as pending until it has run. */
  function enqueue(work: () => Promise<void> | undefined): void {
    pending += 1;
    if (pending >= MAX_PENDING_MESSAGES) updateFlow();
    chain = chain
      .then(work)
      .then(undefined, failWith)
      .finally(() => {
        pending -= 1;
        updateFlow();
      });
  }

  function resetForSession(): void {
    // A new session re-sends from the durable position: whatever was half-received is void.
    openXid = null;
    openBytes.clear();
    if (buffer.openTransactions > 0) {
      retiredBuffers.push(buffer);
      buffer = newBuffer();
    }
  }

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
    ...(config.startLsn ? { startLsn: config.startLsn } : {}),
    onSession(s) {
      if (session && s.systemId !== session.systemId) {
        fail(new EventAssemblerError('SOURCE_SYSTEM_CHANGED', `the server's system identifier changed from ${session.systemId} to ${s.systemId}: this is a different database cluster, refusing to continue`, { before: session.systemId, after: s.systemId, slot: config.slot }));
        return;
      }
      session = s;
      state = 'streaming';
      // Queued (and pending): nothing is taken in on the fast path below before the reset ran.
      enqueue(() => {
        resetForSession();
        return undefined;
      });
    },
    onMessage(message, walStart, size) {
      if (pending === 0) {
        // The hot path: nothing is queued before this message (so order holds), and the buffer
        // takes it in at once unless it has to wait for the disk — no promise per message.
        if (fatalError) return;
        let wait: Promise<void> | undefined;
        try {
          wait = take(message, walStart, size);
        } catch (error) {
          failWith(error);
          return;
        }
        if (wait === undefined) {
          if (message.tag === 'commit' || message.tag === 'stream-commit') updateFlow();
          return;
        }
        // Its failure is handled now (not when the chain gets to it); what comes next waits for it.
        const waiting = wait.then(undefined, failWith);
        enqueue(() => waiting);
        return;
      }
      enqueue(() => (fatalError ? undefined : take(message, walStart, size)));
    },
    isIdle() {
      return pending === 0 && inFlight.length === 0 && buffer.openTransactions === 0;
    },
    idleLimit() {
      const limit = options.idleAcknowledgeLimit?.() ?? null;
      return limit === null ? null : parseLsn(limit);
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
      let report: StartupCheckReport | null = null;
      if (config.checks) {
        const client = new pg.Client(connection);
        await client.connect();
        try {
          report = await runStartupChecks(client, { slot: config.slot, publications, tables: config.tables });
          // The walsender drops a standby that stays silent for wal_sender_timeout; status
          // updates are what keeps a paused (backpressured) reader connected.
          const { rows } = await client.query(`SELECT setting::bigint AS ms FROM pg_catalog.pg_settings WHERE name = 'wal_sender_timeout'`);
          const timeoutMs = Number((rows[0] as { ms?: string } | undefined)?.ms ?? 0);
          if (timeoutMs > 0 && config.statusIntervalMs > timeoutMs / 2) {
            throw new SourceConfigError('statusIntervalMs', `${config.statusIntervalMs} ms is not well below the server's wal_sender_timeout (${timeoutMs} ms); use at most ${Math.floor(timeoutMs / 2)} ms`);
          }
        } finally {
          await client.end().catch(() => {});
        }
      }
      if ((state as SourceState) === 'closed') return report;
      reader.start();
      return report;
    })();
    started.catch(failWith);
    return started;
  }

  return {
    start,
    relations,
    async *transactions() {
      void start().catch(() => {});
      while (true) {
        const next = queue.shift();
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
      return queue.shift() ?? null;
    },
    acknowledge(target) {
      const lsn = typeof target === 'string' ? target : target.endLsn;
      const value = parseLsn(lsn);
      if (value > lastTakenEnd) {
        throw new RangeError(`cannot acknowledge ${lsn}: beyond the last received transaction (${lastTakenEnd < 0n ? 'none' : formatLsn(lastTakenEnd)})`);
      }
      while (inFlight.length > 0 && (inFlight[0] as InFlight).endLsn <= value) {
        inFlightBytes -= (inFlight.shift() as InFlight).bytes;
      }
      reader.confirm(lsn);
      updateFlow();
    },
    status() {
      return {
        state,
        receivedLsn: reader.receivedLsn,
        durableLsn: reader.durableLsn,
        inFlightTransactions: inFlight.length,
        inFlightBytes,
        openTransactions: buffer.openTransactions,
        paused: reader.paused,
        reconnects: reader.reconnects,
        systemId: session?.systemId ?? null,
        timeline: session?.timeline ?? null,
        lastError,
      };
    },
    close() {
      closing ??= (async () => {
        if (state !== 'failed') state = 'closed';
        signal();
        await reader.close();
        await chain.catch(() => {});
        await started?.catch(() => {});
        for (const tx of queue.splice(0)) await tx.release().catch(() => {});
        for (const b of [...retiredBuffers.splice(0), buffer]) await b.close().catch(() => {});
        state = fatalError ? 'failed' : 'closed';
        signal();
      })();
      return closing;
    },
  };
}
