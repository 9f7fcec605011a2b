/**
 * The configuration schema. Defaults live next to each field, in its doc comment; `parseConfig`
 * is the only place that applies them. Every error names the field (dotted path) and the fix.
 */
import { normalizeSourceConnection } from '../source/multi-host.js';
import { z } from 'zod';
import type { AnyMapper } from '../mapping/index.js';
import type { PostgresSourceTable } from '../source/index.js';
import type { AnyReconciler } from '../reconcile/define-reconciler.js';
import {
  add, capturedTables, checkKurrentDBConnection, checkMapperNames, checkPostgresConnection, checkSpillDir, contractsDir, FIXES, member, reported, resolveSecret, zodProblem,
  type Findings,
} from './checks.js';
import { ConfigError } from './config-error.js';
import { checkReconcilers } from './reconcilers.js';
import { createRedactor, type Redactor } from './redact.js';

export { ConfigError, type ConfigErrorDetails } from './config-error.js';

/**
 * A secret-bearing value: a literal, `env:VARIABLE` (read from the environment at start-up), or
 * a function returning the value (e.g. `() => process.env.CAPTURE_URL`). Secrets are never
 * logged: passwords are masked in every log line and error.
 */
export type SecretValue = string | (() => string | undefined);

export interface SourceConfig {
  /**
   * Connection of the capture role (LOGIN REPLICATION + SELECT on the captured tables), e.g.
   * `env:CAPTURE_DATABASE_URL`. Several hosts (failover, docs/failover.md):
   * `postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write` or `host=h1,h2 …`; each
   * connection takes the first host that is not in recovery. Required.
   */
  readonly connection: SecretValue;
  /** Logical replication slot (pgoutput), created by `event-assembler setup`. Required. */
  readonly slot: string;
  /** Publication name(s); together they must contain exactly the captured tables. Required. */
  readonly publication: string | readonly string[];
  /**
   * Captured tables. Default: every table the mappers declare, with `needsOldValues` and
   * `requiredColumns` from `mapperRequirements(mappers)`.
   */
  readonly tables?: readonly (string | PostgresSourceTable)[];
  /** Standby status update period (must be well below `wal_sender_timeout`). Default: 10 000 ms. */
  readonly statusIntervalMs?: number;
  /** Directory for spill files of large transactions. Default: the OS temp directory. */
  readonly spillDir?: string;
}

export interface DestinationConfig {
  /** KurrentDB connection string, e.g. `env:KURRENTDB_URL` or `kurrentdb://localhost:2113?tls=false`. Required. */
  readonly connectionString: SecretValue;
  /**
   * `auto` uses multi-stream append (one source transaction lands atomically) where the server
   * serves it (KurrentDB 25.1+), else per-stream appends; `multi-stream` refuses to start without it.
   * Default: `auto`.
   */
  readonly mode?: 'auto' | 'multi-stream' | 'per-stream';
  /** The server's `MaxAppendSize` in bytes. Default: 1 048 576. */
  readonly maxAppendSize?: number;
  /** Longest wait for one append before it is retried. Default: 30 000 ms. */
  readonly timeoutMs?: number;
  /** Backoff while the destination is unavailable. Default: 100 ms doubling to 5 000 ms, unlimited attempts. */
  readonly retry?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number; readonly maxAttempts?: number };
}

export interface ContractsConfig {
  /** Directory of JSON Schema contracts (`<Type>.v<N>.schema.json`), relative to the working directory. Required. */
  readonly dir: string;
}

export interface SnapshotConfig {
  /**
   * What to do with rows that existed before the slot: `never` streams changes only;
   * `initial` reads every captured table at the new slot's exported snapshot (when no slot and no
   * stored position exist yet), then streams from the slot's consistent point; `initial_only`
   * does the snapshot and stops. Progress is kept in KurrentDB (stream
   * `event-assembler.snapshot-<name>`), so an interrupted snapshot resumes. `when_needed` is
   * `initial`, and when the stored position can no longer be served (slot dropped, invalidated,
   * or advanced past what was recorded) it drops/re-creates the slot and reads every captured
   * table again as a NEW snapshot generation (logged as a warning, shown in `status`) instead
   * of refusing with REBUILD_NEEDED. Ad hoc snapshots (`event-assembler snapshot --config …`)
   * run in every mode. Default: `never`.
   */
  readonly mode?: 'initial' | 'never' | 'when_needed' | 'initial_only';
  /**
   * Rows per snapshot chunk. Default: 256 for the initial snapshot (read with COPY at the slot's
   * exported snapshot), 1024 for incremental ones (resumed or ad hoc: one windowed query per
   * chunk, whose cost per row grows as chunks shrink). Set, it applies to both.
   */
  readonly chunkSize?: number;
  /** Tables snapshotted at once. Default: 1. */
  readonly parallelism?: number;
  /**
   * Incremental snapshots (resumed or ad hoc): chunks read while the chunk before is still being
   * mapped and appended. 0 (default) leaves room between chunks for the stream's own transactions;
   * 1 reads faster, and a concurrent writer's commit → durable grows (docs/snapshots.md). At most 3.
   */
  readonly readAhead?: number;
}

export interface FailurePolicyConfig {
  /**
   * An event that violates its contract: `halt` stops the line with a diagnosis (the slot is not
   * acknowledged past it); `park` appends a `ContractViolation` failed record to
   * `event-assembler.failed-<name>` instead of the event and goes on. Mapper errors follow each
   * mapper's own `onError`. Default: `halt`.
   */
  readonly contractViolation?: 'halt' | 'park';
}

export interface LimitsConfig {
  /**
   * Transactions received and not yet durable before reading pauses (backpressure). Default: 4000
   * (1000 until 2026-12-07: it paused reading while four append calls of ≈ 200 were in flight,
   * bench/results/2026-12-07-in-flight.md).
   */
  readonly maxInFlightTransactions?: number;
  /** pgoutput bytes received and not yet durable before reading pauses. Default: 64 MiB. */
  readonly maxInFlightBytes?: number;
  /** Decoded changes held in memory before a large transaction spills to disk. Default: 64 MiB. */
  readonly memoryLimitBytes?: number;
  /**
   * Append calls in flight at once, on disjoint streams (a transaction touching a stream of a
   * call in flight waits for it, so every stream keeps source order). Default: 4.
   */
  readonly maxConcurrentAppends?: number;
  /**
   * The fewest transactions (or snapshot records) of a call that starts while another is in
   * flight; a smaller batch waits for a call to end and grows meanwhile (a full call always may
   * go). 1: any batch may start at once, as before 2026-12-07. Default: 64.
   */
  readonly minConcurrentBatch?: number;
  /**
   * Group commit: the most source transactions (or snapshot records) one append call carries.
   * Transactions waiting while a call is in flight go together in the next one (one atomic
   * multi-stream append); at a low rate each goes alone. Default: 512.
   */
  readonly maxBatchTransactions?: number;
  /** The most events one append call carries (a single larger transaction still goes alone). Default: 2048. */
  readonly maxBatchEvents?: number;
  /**
   * Streams whose revision and last receipt the sink keeps in memory (a segmented LRU: streams
   * used once are forgotten before streams used again; src/sink/state-cache.ts), 0.2–0.3 KB each
   * (bench/stream-cache.bench.ts: 197–199 bytes for a stream appended to, with a 13-character
   * name; a state read from the server also keeps its tail event's id): the default 100,000 ≈
   * 25 MB. A stream not in it costs one tail read (or one failed optimistic append) when next
   * appended to — beyond it the line is as correct, only slower. Default: 100000.
   */
  readonly maxCachedStreams?: number;
}

export interface LifecycleConfig {
  /**
   * After a stop (SIGTERM/SIGINT, `assembler.stop()`), the longest wait for appends in flight to
   * become durable. When it passes, the assembler exits without acknowledging what is not
   * durable: nothing is lost, the slot sends it again on the next start. Orchestrators usually
   * allow ~30 s between SIGTERM and SIGKILL; keep this below theirs. Default: 10 000 ms.
   */
  readonly drainTimeoutMs?: number;
  /**
   * How long start-up keeps retrying a PostgreSQL or KurrentDB it cannot reach (each attempt
   * logged with the server, its address and the reason) before it gives up with
   * SOURCE_UNAVAILABLE / DESTINATION_UNAVAILABLE (`run` exits 4). Default: no deadline — retry
   * until stopped.
   */
  readonly startupTimeoutMs?: number;
}

export interface StandbyConfig {
  /**
   * While another process streams the slot (this one is a standby), how often it asks whether the
   * slot is free: a fixed interval, no growing backoff. A takeover follows the slot's release
   * within about this long. Default: 1 000 ms.
   */
  readonly pollIntervalMs?: number;
}

export interface ObservabilityConfig {
  /**
   * Port of the HTTP listener serving `/metrics`, `/healthz`, `/readyz`, `/status.json` and `/`.
   * `0` picks a free port (logged, and on `assembler.observability()`). Required to turn the
   * listener on: without an `observability` section there is no listener and no heartbeat.
   */
  readonly port: number;
  /** Interface to bind. Default: `127.0.0.1` (loopback only; use `0.0.0.0` to let Prometheus in from elsewhere). */
  readonly host?: string;
  /**
   * Every this many milliseconds the assembler writes a heartbeat into the WAL
   * (`pg_logical_emit_message(true, 'event-assembler.heartbeat', …)`) on its own small
   * connection; when it comes back through the slot and is durable, freshness is measured
   * end to end, so an idle database reads fresh and a stuck pipeline stale. Default: 10 000.
   */
  readonly heartbeatIntervalMs?: number;
  /** `/readyz` answers 503 once freshness is older than this. Default: 60 000 ms. */
  readonly maxFreshnessMs?: number;
}

export interface AssemblerConfig {
  /**
   * The assembler's name: part of every event id, stamped in receipts, and names the
   * checkpoint stream (`event-assembler.checkpoint-<name>`) and the failed-records stream
   * (`event-assembler.failed-<name>`). Letters, digits, `_`, `.`, `-`. Required.
   */
  readonly name: string;
  readonly source: SourceConfig;
  readonly destination: DestinationConfig;
  /** The mappers, in the order they run on each transaction. Required (at least one). */
  readonly mappers: readonly AnyMapper[];
  readonly contracts: ContractsConfig;
  /** Default: `{ mode: 'never' }`. */
  readonly snapshot?: SnapshotConfig;
  /** Default: `{ contractViolation: 'halt' }`. */
  readonly failurePolicy?: FailurePolicyConfig;
  /** Defaults: see each field. */
  readonly limits?: LimitsConfig;
  /** Stop and start-up. Defaults: see each field. */
  readonly lifecycle?: LifecycleConfig;
  /** A second instance with the same configuration waits as a standby (docs/running.md, "Running a standby"). Defaults: see each field. */
  readonly standby?: StandbyConfig;
  /** Metrics, health endpoints and the freshness heartbeat (docs/operations.md). Default: off. */
  readonly observability?: ObservabilityConfig;
  /** What `event-assembler reconcile` compares: one `defineReconciler(…)` per table (docs/reconcile.md). Default: none. */
  readonly reconcilers?: readonly AnyReconciler[];
}

/** Only types the configuration (so an editor can complete it); validation happens in `parseConfig`. */
export function defineConfig<const C extends AssemblerConfig>(config: C): C {
  return config;
}

/** The configuration after validation: secrets resolved, defaults filled in. */
export interface ResolvedConfig {
  readonly name: string;
  readonly source: {
    readonly connection: string;
    readonly slot: string;
    readonly publication: readonly string[];
    readonly tables: readonly PostgresSourceTable[];
    readonly statusIntervalMs?: number;
    readonly spillDir?: string;
  };
  readonly destination: {
    readonly connectionString: string;
    readonly mode: 'auto' | 'multi-stream' | 'per-stream';
    readonly maxAppendSize?: number;
    readonly timeoutMs?: number;
    readonly retry?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number; readonly maxAttempts?: number };
  };
  readonly mappers: readonly AnyMapper[];
  readonly contracts: { readonly dir: string };
  /** `chunkSize` as configured (undefined: each kind's default, `initialChunkRows`/`incrementalChunkRows`). */
  readonly snapshot: { readonly mode: 'initial' | 'never' | 'when_needed' | 'initial_only'; readonly chunkSize?: number; readonly parallelism: number; readonly readAhead: number };
  readonly failurePolicy: { readonly contractViolation: 'halt' | 'park' };
  readonly limits: {
    readonly maxInFlightTransactions: number;
    readonly maxInFlightBytes: number;
    readonly memoryLimitBytes: number;
    readonly maxConcurrentAppends: number;
    readonly minConcurrentBatch: number;
    readonly maxBatchTransactions: number;
    readonly maxBatchEvents: number;
    readonly maxCachedStreams: number;
  };
  readonly lifecycle: { readonly drainTimeoutMs: number; readonly startupTimeoutMs: number | null };
  readonly standby: { readonly pollIntervalMs: number };
  /** `null`: no listener, no heartbeat. */
  readonly observability: { readonly port: number; readonly host: string; readonly heartbeatIntervalMs: number; readonly maxFreshnessMs: number } | null;
  /** `[]` when none are configured. */
  readonly reconcilers: readonly AnyReconciler[];
  /** Masks the configuration's secrets in texts, log fields and errors. */
  readonly redactor: Redactor;
}

/** Snapshot modes the pipeline runs (all of them). */
export const SNAPSHOT_MODES_ACCEPTED = ['never', 'initial', 'when_needed', 'initial_only'] as const;

const MiB = 1024 * 1024;

const secret = z.union([z.string().min(1), z.custom<() => string | undefined>((v) => typeof v === 'function', 'must be a string or a function returning one')]);
const positiveInt = z.number().int().positive();

const tableSchema = z.union([
  z.string().min(1),
  z.object({ table: z.string().min(1), needsOldValues: z.boolean().optional(), requiredColumns: z.array(z.string().min(1)).optional() }).strict(),
]);

const mapperSchema = z.custom<AnyMapper>(
  (v) =>
    v !== null && typeof v === 'object' && typeof (v as AnyMapper).name === 'string' && typeof (v as AnyMapper).map === 'function' &&
    typeof (v as AnyMapper).tables === 'object',
  'must be a mapper made by defineMapper({ name, tables, map })',
);

const configSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_.-]{1,100}$/, 'must be 1-100 letters, digits, "_", "." or "-"'),
    source: z
      .object({
        connection: secret,
        slot: z.string().regex(/^[a-z0-9_]{1,63}$/, 'slot names are lower-case letters, digits and _ (at most 63)'),
        publication: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
        tables: z.array(tableSchema).min(1).optional(),
        statusIntervalMs: z.number().int().min(100).optional(),
        spillDir: z.string().min(1).optional(),
      })
      .strict(),
    destination: z
      .object({
        connectionString: secret,
        mode: z.enum(['auto', 'multi-stream', 'per-stream']).default('auto'),
        maxAppendSize: positiveInt.optional(),
        timeoutMs: positiveInt.optional(),
        retry: z.object({ initialDelayMs: positiveInt.optional(), maxDelayMs: positiveInt.optional(), maxAttempts: positiveInt.optional() }).strict().optional(),
      })
      .strict(),
    mappers: z.array(mapperSchema).min(1, 'list at least one mapper'),
    contracts: z.object({ dir: z.string().min(1) }).strict(),
    snapshot: z
      .object({
        mode: z.enum(['initial', 'never', 'when_needed', 'initial_only']).default('never'),
        chunkSize: positiveInt.optional(),
        parallelism: positiveInt.default(1),
        readAhead: z.number().int().min(0).max(3).default(0),
      })
      .strict()
      .default({ mode: 'never', parallelism: 1, readAhead: 0 }),
    failurePolicy: z
      .object({ contractViolation: z.enum(['halt', 'park']).default('halt') })
      .strict()
      .default({ contractViolation: 'halt' }),
    limits: z
      .object({
        maxInFlightTransactions: positiveInt.default(4000),
        maxInFlightBytes: positiveInt.default(64 * MiB),
        memoryLimitBytes: positiveInt.default(64 * MiB),
        maxConcurrentAppends: positiveInt.max(64).default(4),
        minConcurrentBatch: positiveInt.default(64),
        maxBatchTransactions: positiveInt.max(100_000).default(512),
        maxBatchEvents: positiveInt.max(1_000_000).default(2048),
        maxCachedStreams: positiveInt.default(100_000),
      })
      .strict()
      .default({ maxInFlightTransactions: 4000, maxInFlightBytes: 64 * MiB, memoryLimitBytes: 64 * MiB, maxConcurrentAppends: 4, minConcurrentBatch: 64, maxBatchTransactions: 512, maxBatchEvents: 2048, maxCachedStreams: 100_000 }),
    lifecycle: z
      .object({ drainTimeoutMs: positiveInt.default(10_000), startupTimeoutMs: positiveInt.optional() })
      .strict()
      .default({ drainTimeoutMs: 10_000 }),
    standby: z
      .object({ pollIntervalMs: positiveInt.min(10).max(600_000).default(1_000) })
      .strict()
      .default({ pollIntervalMs: 1_000 }),
    observability: z
      .object({
        port: z.number().int().min(0).max(65_535),
        host: z.string().min(1).default('127.0.0.1'),
        heartbeatIntervalMs: z.number().int().min(100).max(3_600_000).default(10_000),
        maxFreshnessMs: positiveInt.default(60_000),
      })
      .strict()
      .optional(),
    // Checked by checkReconcilers (made by defineReconciler, tables and columns the mappers allow).
    reconcilers: z.array(z.unknown()).optional(),
  })
  .strict();

export interface ParseConfigOptions {
  /** Extra directory to resolve a relative `contracts.dir` against (the config file's). Default: none. */
  readonly baseDir?: string;
}

/**
 * Validates, resolves secrets, applies defaults. Throws one {@link ConfigError} listing every
 * problem found (`problems`; `field`/`details`: the first).
 */
export function parseConfig(config: AssemblerConfig, options: ParseConfigOptions = {}): ResolvedConfig {
  if (config === null || typeof config !== 'object') {
    throw new ConfigError('(config)', `expected an object, got ${config === null ? 'null' : typeof config}`, 'export default defineConfig({ name, source, destination, mappers, contracts })');
  }
  const findings: Findings = { problems: [], reported: [] };
  const parsed = configSchema.safeParse(config);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const problem = zodProblem(config, issue);
      findings.problems.push(problem);
      findings.reported.push(problem.field);
    }
  } else if (!(SNAPSHOT_MODES_ACCEPTED as readonly string[]).includes(parsed.data.snapshot.mode)) {
    add(findings, 'snapshot.mode', `'${parsed.data.snapshot.mode}' is not a snapshot mode`, FIXES['snapshot.mode']!);
  }
  // The checks zod cannot make, on the configuration as given (parsed or not).
  const given = config as unknown as Record<string, unknown>;
  checkMapperNames(given['mappers'], findings);
  const mappers = Array.isArray(given['mappers']) && !reported(findings, 'mappers') ? (given['mappers'] as AnyMapper[]) : null;
  const tables = capturedTables(member(given['source'], 'tables'), mappers, findings);
  const givenConnection = resolveSecret(member(given['source'], 'connection'), 'source.connection', findings);
  const connectionString = resolveSecret(member(given['destination'], 'connectionString'), 'destination.connectionString', findings);
  if (givenConnection !== null) checkPostgresConnection(givenConnection, findings);
  // The keyword form (`host=a,b port=… dbname=…`) is carried on as the URL it means.
  const connection = givenConnection === null || reported(findings, 'source.connection') ? givenConnection : normalizeSourceConnection(givenConnection);
  if (connectionString !== null) checkKurrentDBConnection(connectionString, findings);
  checkSpillDir(member(given['source'], 'spillDir'), findings);
  const dir = contractsDir(member(given['contracts'], 'dir'), options, findings);
  const reconcilers = checkReconcilers(given['reconcilers'], mappers, findings);
  if (!parsed.success || findings.problems.length > 0 || connection === null || connectionString === null || dir === null) throw ConfigError.of(findings.problems);
  const c = parsed.data;

  return {
    name: c.name,
    source: {
      connection,
      slot: c.source.slot,
      publication: typeof c.source.publication === 'string' ? [c.source.publication] : [...c.source.publication],
      tables,
      ...(c.source.statusIntervalMs !== undefined ? { statusIntervalMs: c.source.statusIntervalMs } : {}),
      ...(c.source.spillDir !== undefined ? { spillDir: c.source.spillDir } : {}),
    },
    destination: {
      connectionString,
      mode: c.destination.mode,
      ...(c.destination.maxAppendSize !== undefined ? { maxAppendSize: c.destination.maxAppendSize } : {}),
      ...(c.destination.timeoutMs !== undefined ? { timeoutMs: c.destination.timeoutMs } : {}),
      ...(c.destination.retry !== undefined ? { retry: c.destination.retry } : {}),
    },
    mappers: c.mappers,
    contracts: { dir },
    snapshot: c.snapshot,
    failurePolicy: c.failurePolicy,
    limits: c.limits,
    lifecycle: { drainTimeoutMs: c.lifecycle.drainTimeoutMs, startupTimeoutMs: c.lifecycle.startupTimeoutMs ?? null },
    standby: c.standby,
    observability: c.observability ?? null,
    reconcilers,
    redactor: createRedactor([connection, connectionString]),
  };
}

/**
 * Rows per chunk of the initial snapshot: 256 unless `snapshot.chunkSize` says otherwise. Against
 * 1024 the same speed and 14–42 MiB less peak RSS at 1,000,000 rows
 * (bench/results/2026-12-03-snapshot-threads.md).
 */
export function initialChunkRows(config: ResolvedConfig): number {
  return config.snapshot.chunkSize ?? 256;
}

/** Rows per chunk of an incremental snapshot (resumed or ad hoc): 1024 unless `snapshot.chunkSize` says otherwise (at 256 a quarter to a third slower). */
export function incrementalChunkRows(config: ResolvedConfig): number {
  return config.snapshot.chunkSize ?? 1024;
}
