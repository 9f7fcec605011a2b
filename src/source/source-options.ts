/**
 * The source's configuration: its options with their defaults, validated once at start-up with
 * zod; a bad option fails with a {@link SourceConfigError} that names the field.
 */
import type pg from 'pg';
import { z } from 'zod';
import { EventAssemblerError } from '../errors.js';
import type { CapturedTable } from './checks.js';
import { parseSourceHosts, SourceConnectionStringError } from './multi-host.js';
import { isLsn } from './position.js';
import { DEFAULT_BACKOFF, DEFAULT_SLOT_POLL_INTERVAL_MS, type ReplicationSession, type SlotHolder } from './replication.js';
import type { Lsn, MessageChange, QualifiedTable } from './types.js';

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
  slotPollIntervalMs: z.number().int().min(10).max(600_000).default(DEFAULT_SLOT_POLL_INTERVAL_MS),
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
  /**
   * Told about each replication session as it begins (before START_REPLICATION): the server it
   * runs on, its timeline, the position it starts at, and the previous session (`null` for the
   * first) — a new server or timeline is a failover. Default: none.
   */
  readonly onSession?: (session: ReplicationSession, previous: ReplicationSession | null) => void;
  /** Told about each lost connection and the delay before the next attempt. Default: none. */
  readonly onReconnect?: (error: Error, delayMs: number, attempt: number) => void;
  /**
   * While another connection streams the slot (SQLSTATE 55006), how often to ask again: a fixed
   * interval, not the growing backoff (waiting is the cure). Default: 1 000 ms.
   */
  readonly slotPollIntervalMs?: number;
  /**
   * Told each time a session finds the slot streamed by another connection: its holder (pid,
   * client, and `ours` when it is a lost connection of this source's own) and the delay before
   * asking again. Default: none (the source keeps polling).
   */
  readonly onSlotActive?: (holder: SlotHolder, delayMs: number) => void;
  /**
   * Told once per table when pgoutput describes a table that is not in `tables`: it was added to
   * the publication while streaming (or a captured table was renamed). Its changes reach no
   * mapper, and the next start's publication check refuses. Default: none.
   */
  readonly onUncapturedTable?: (table: QualifiedTable) => void;
}

export type ParsedOptions = z.infer<typeof optionsSchema>;

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
  try {
    parseSourceHosts(parsed.data.connection as string | pg.ClientConfig);
  } catch (error) {
    if (error instanceof SourceConnectionStringError) throw new SourceConfigError('connection', error.message.replace(/^source\.connection: /, ''));
    throw error;
  }
  if (parsed.data.streaming && parsed.data.protocolVersion < 2) {
    throw new SourceConfigError('streaming', 'streaming needs protocolVersion 2; set streaming: false to use protocol 1');
  }
  return { ...parsed.data, tables };
}
