// The consumer kit's shared shapes: the event a handler receives, the projection definition, the
// runner's options and status. Implementations sit beside this file (see index.ts).
import type pg from 'pg';
import type { SecretValue } from '../config/schema.js';
import type { Redactor } from '../config/redact.js';
import type { Upcaster } from '../contracts/upcasters.js';
import type { Lsn } from '../source/types.js';

/** A position in `$all` (KurrentDB's commit and prepare positions). */
export interface AllPosition {
  readonly commit: bigint;
  readonly prepare: bigint;
}

/**
 * Where an event came from in the source database, read from the metadata the assembler writes
 * (`src/mapping/map-unit.ts`, receipts in `src/sink/receipt.ts`: the `receipt` property, or the
 * flat `receipt.*` keys of events written by earlier versions). Change events carry the
 * transaction's position; snapshot events the snapshot's generation and the LSN it is ordered at.
 */
export type EventSource =
  | {
      readonly origin: 'change';
      /** The opaque source checkpoint (`source.checkpoint`): `v1:<systemId>:<timeline>:<slot>:<commitLsn>:<xid>`. */
      readonly checkpoint: string;
      /** `source.commitLsn`. */
      readonly commitLsn: Lsn;
      /** `source.xid`. */
      readonly xid: number;
      /** `source.commitTime` (ISO 8601), when present. */
      readonly commitTime: string | null;
      /** The source system (pg_control system identifier), from the checkpoint. */
      readonly systemId: string | null;
      readonly timeline: number | null;
    }
  | {
      readonly origin: 'snapshot';
      /** `snapshot.generation`. */
      readonly generation: string;
      /** The receipt's `lsn`: the snapshot's consistent point or the chunk's high watermark. */
      readonly lsn: Lsn | null;
      /** The receipt's `sequence`: emit order within the generation. */
      readonly sequence: number | null;
      /** The receipt's `source`, when the assembler knew it. */
      readonly systemId: string | null;
      /**
       * `snapshot.kind`: `initial` (the generation that begins the entity streams), `ad_hoc` (a
       * deliberate re-reading: it re-states current state); absent when the assembler did not say.
       */
      readonly kind?: 'initial' | 'incremental' | 'ad_hoc';
    }
  /** Not written by the assembler (or metadata it does not recognise). */
  | { readonly origin: 'unknown' };

/**
 * An event's place in its source history, for last-write-wins per entity: LSN (the commit LSN, or
 * a snapshot record's LSN), then a snapshot record before a transaction at the same LSN, then
 * (snapshot records) generation and sequence, then the event's ordinal among its unit's events
 * (`transaction.index`). Comparable only within one source system (`systemId`).
 */
export interface SourceVersion {
  readonly systemId: string;
  readonly lsn: Lsn;
  readonly kind: 'snapshot' | 'change';
  /** Snapshot records: generation and sequence; `null` for changes. */
  readonly generation: string | null;
  readonly sequence: number | null;
  readonly ordinal: number;
}

/** The event a handler receives. `version` is the contract version of `data` (the newest after upcasting). */
export interface ProjectionEvent<TType extends string = string, TData = unknown> {
  /** The event id (deterministic UUID): what receipts record. */
  readonly id: string;
  readonly type: TType;
  /** From metadata `contract` (`type@version`), the newest version after upcasting; `null` when the event does not say. */
  readonly version: number | null;
  readonly data: TData;
  readonly stream: string;
  readonly revision: bigint;
  /** Where the event sits in `$all`. */
  readonly position: AllPosition;
  readonly source: EventSource;
  /** `transaction.index` / `transaction.count` (the event's place among its source unit's events) and `$correlationId`. */
  readonly transaction: { readonly index: number; readonly count: number; readonly correlationId: string | null } | null;
  /** `entity.type` / `entity.id`. */
  readonly entity: { readonly type: string; readonly id: string } | null;
  /** The event's version for last-write-wins, when the metadata allows one. */
  readonly sourceVersion: SourceVersion | null;
  /** All metadata, as stored (string values). */
  readonly metadata: Readonly<Record<string, string>>;
}

/** What a handler gets besides the event. */
export interface ProjectionContext {
  /** The PostgreSQL client inside the batch's transaction: effects done through it commit with the receipt and the checkpoint. */
  readonly client: pg.ClientBase;
  /** The schema of the projection's own tables. */
  readonly schema: string;
  readonly projection: string;
}

/** Event data per event type, e.g. `LatestEventContracts` from `contracts gen`. */
export type EventMap = Record<string, unknown>;

export type ProjectionHandler<TType extends string, TData> = (event: ProjectionEvent<TType, TData>, ctx: ProjectionContext) => void | Promise<void>;

export type ProjectionHandlers<E extends EventMap> = { readonly [K in keyof E & string]?: ProjectionHandler<K, E[K]> };

export interface PartitionSpec {
  /** How many partitions the projection's streams are split into (≥ 1). */
  readonly count: number;
  /** This runner's partition, 0 … count − 1. */
  readonly index: number;
}

/** What a failing handler does once its retries are spent: park the event in the failed-events table, or halt the runner. */
export type OnError = 'park' | 'halt';

export interface ProjectionDefinition<E extends EventMap = EventMap> {
  /** Unique name: keys the checkpoint, receipts, entity versions and failed events. `[a-z0-9_-]`, up to 63 characters. */
  readonly name: string;
  /** Which events: `categories` (`'invoice'` selects streams `invoice-*`) and/or event `types`; at least one. */
  readonly from: { readonly categories?: readonly string[]; readonly types?: readonly string[] };
  readonly handlers: ProjectionHandlers<E>;
  /** Event types that delete their entity: applying one leaves a tombstone with its source version. @default [] */
  readonly deletes?: readonly (keyof E & string)[];
  /** Events applied per PostgreSQL transaction (at most; a batch is also cut when the subscription is idle). @default 100 */
  readonly batchSize?: number;
  /** @default 'halt' */
  readonly onError?: OnError;
  /** Handler retries before parking or halting, with exponential backoff. @default { attempts: 3, initialDelayMs: 100, maxDelayMs: 5000 } */
  readonly retry?: Partial<RetryOptions>;
  /** Only streams whose name hashes (FNV-1a) to `index` modulo `count`. @default one partition */
  readonly partition?: PartitionSpec;
  /** Creates the projection's own tables in `schema` (idempotently: it runs at every start, in a transaction). */
  readonly setup?: (client: pg.ClientBase, schema: string) => void | Promise<void>;
  /**
   * What commits together: `'batch'` — up to `batchSize` events, cut anywhere; `'transaction'` —
   * whole source transactions (all their events this projection selects, across streams), never
   * cut. See docs/consumers.md, "Transaction-atomic mode". @default 'batch'
   */
  readonly atomic?: Atomicity;
}

/** What a projection commits together: batches cut anywhere, or whole source transactions. */
export type Atomicity = 'batch' | 'transaction';

export interface RetryOptions {
  /** Tries of a failing event alone, after the batch it was in failed. */
  readonly attempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

/** A checked projection definition (see `defineProjection`). */
export interface Projection<E extends EventMap = EventMap> {
  readonly name: string;
  readonly categories: readonly string[];
  readonly types: readonly string[];
  readonly handlers: ProjectionHandlers<E>;
  readonly deletes: ReadonlySet<string>;
  readonly batchSize: number;
  readonly onError: OnError;
  readonly retry: RetryOptions;
  readonly partition: PartitionSpec;
  readonly setup: ((client: pg.ClientBase, schema: string) => void | Promise<void>) | null;
  readonly atomic: Atomicity;
}

/** Why an event was not applied again. */
export type Guard = 'position' | 'receipt' | 'entityVersion';

/** What one batch did. */
export interface BatchOutcome {
  readonly applied: number;
  /** Events selected but without a handler (and not a delete): nothing to do. */
  readonly unhandled: number;
  readonly skipped: Readonly<Record<Guard, number>>;
  /** The checkpoint after the batch. */
  readonly position: AllPosition | null;
}

/** The minimal logger the runner writes to (the pipeline's `Logger` fits). */
export interface ProjectionLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export interface ProjectionRunnerOptions {
  readonly projection: Projection<any>;
  /** PostgreSQL holding the kit's state and the projection: a connection string or a `pg.Pool` (not ended by the runner). */
  readonly postgres: string | pg.Pool;
  /** KurrentDB connection string. */
  readonly kurrentdb: string;
  /** Schema of the kit's state (checkpoints, receipts, entity versions, failed events). @default 'event_assembler' */
  readonly stateSchema?: string;
  /** Schema of the projection's own tables, handed to `setup` and to handlers as `ctx.schema`. @default 'public' */
  readonly schema?: string;
  /**
   * Write into generation N (made by `rebuildProjection`; serving or kept for rollback): tables in
   * schema `<name>_g<N>`, checkpoint rows, receipts and entity versions under `<name>@g<N>`. Not
   * with `schema`. `'serving'`: the generation serving readers when the runner starts, or — none
   * serves — as without a generation (`schema` and the projection's name); a later switch is not
   * followed (restart the runner). @default no generation: `schema` and the projection's name
   */
  readonly generation?: number | 'serving';
  /** Validate every event against its contract and upcast it to the newest version. @default no validation */
  readonly contracts?: { readonly dir: string; readonly upcasters?: readonly Upcaster[] };
  /**
   * When another instance is active on the partition (holds its lease): `false` — `run()` rejects
   * with `ProjectionLeaseHeldError` at once; `true` — wait as a standby (state `standby`) and take
   * over from the checkpoint when the other stops, crashes or loses its connection. @default false
   */
  readonly standby?: boolean;
  /** How often a standby tries the lease. @default 1000 */
  readonly standbyPollMs?: number;
  /** @default silent */
  readonly logger?: ProjectionLogger;
}

/** `standby`: waiting for the partition's lease while another instance is active. */
export type RunnerState = 'idle' | 'starting' | 'standby' | 'running' | 'stopping' | 'stopped' | 'failed';

export interface ProjectionStatus {
  readonly projection: string;
  /** `index/count`. */
  readonly partition: string;
  readonly state: RunnerState;
  /** The stored checkpoint (`null`: nothing applied yet). */
  readonly position: AllPosition | null;
  /** Events whose handler ran (or whose tombstone was written), since start. */
  readonly applied: number;
  readonly unhandled: number;
  readonly skipped: Readonly<Record<Guard, number>>;
  /** Events parked since start. */
  readonly parked: number;
  readonly batches: number;
  /** Whether the subscription has reached the head of `$all` at least once. */
  readonly caughtUp: boolean;
  /** Events received from the subscription and not yet applied (atomic mode: also those not selected, held until their transaction is complete). */
  readonly queued: number;
  /** Atomic mode: source transactions begun and not yet complete. */
  readonly openTransactions: number;
  readonly error: Error | null;
}

export interface ProjectionRunner {
  /** Runs until `stop()` or a failure; resolves on stop, rejects with the failure. */
  run(): Promise<void>;
  /** Finishes the batch in flight, then ends `run()`. */
  stop(): Promise<void>;
  status(): ProjectionStatus;
}

/** The module `event-assembler project --config <file>` loads (its default export; see `defineProjectionConfig`). */
export interface ProjectionConfig {
  /** PostgreSQL of the projections and the kit's state, e.g. `env:PROJECTION_DATABASE_URL` (a literal, `env:VARIABLE` or a function). Required. */
  readonly postgres: SecretValue;
  /** KurrentDB connection string, e.g. `env:KURRENTDB_URL`. Required. */
  readonly kurrentdb: SecretValue;
  /** Projections made with `defineProjection`, one runner each; a name may repeat only with different partitions. Required (at least one). */
  readonly projections: readonly Projection<any>[];
  /** Validate every event against its contract and upcast it (`dir` relative to the working directory, then to the config file). @default no validation */
  readonly contracts?: { readonly dir: string; readonly upcasters?: readonly Upcaster[] };
  /** Schema of the kit's state tables. @default 'event_assembler' */
  readonly stateSchema?: string;
  /** Schema of the projections' own tables. @default 'public' */
  readonly schema?: string;
  /**
   * What `event-assembler project rebuild` does per projection, by projection name (each must be
   * one of `projections`): `{ accounts: { validate: { table: 'accounts', sample: 50, source, check } } }`.
   * @default no validation: a rebuilt generation is switched in once loaded
   */
  readonly rebuild?: { readonly [projection: string]: ProjectionRebuildConfig };
}

/** One projection's entry in `ProjectionConfig.rebuild`. */
export interface ProjectionRebuildConfig {
  /** Checked before readers are switched to the rebuilt generation (as `RebuildOptions.validate`). @default no validation */
  readonly validate?: RebuildValidation;
}

/** A projection configuration after validation: secrets resolved, defaults filled in. */
export interface ResolvedProjectionConfig {
  readonly postgres: string;
  readonly kurrentdb: string;
  readonly projections: readonly Projection<any>[];
  readonly contracts: { readonly dir: string; readonly upcasters: readonly Upcaster[] } | null;
  readonly stateSchema: string;
  readonly schema: string;
  /** By projection name; a projection without an entry has none (`{}` when `rebuild` is left out). */
  readonly rebuild: { readonly [projection: string]: ProjectionRebuildConfig };
  /** Masks the configuration's secrets in texts, log fields and errors. */
  readonly redactor: Redactor;
}

/**
 * A generation's state: `building` (a rebuild loads it), `serving` (readers' views point at it),
 * `standby` (served before, kept for rollback), `failed` (its rebuild failed or was abandoned).
 */
export type GenerationState = 'building' | 'serving' | 'standby' | 'failed';

/** One generation of a projection, as `projection_generations` records it. */
export interface GenerationInfo {
  readonly projection: string;
  readonly generation: number;
  /** Where its tables are: `<name>_g<N>`. */
  readonly schema: string;
  readonly state: GenerationState;
  /** The generation that served before this one was switched in (what a rollback returns to). */
  readonly previous: number | null;
  /** The freshness point it was loaded to (`null`: `$all` was empty). */
  readonly position: AllPosition | null;
  /** Why it failed. */
  readonly failure: string | null;
  readonly createdAt: Date;
  /** When it last became the serving generation. */
  readonly switchedAt: Date | null;
}

/** Where the kit's state is: shared by the generation functions. */
export interface GenerationStoreOptions {
  /** A connection string or a `pg.Pool` (not ended here). */
  readonly postgres: string | pg.Pool;
  /** @default 'event_assembler' */
  readonly stateSchema?: string;
}

/** A row of a projection's table, as `pg` returns it. */
export type ProjectionRow = Record<string, unknown>;

/**
 * What a rebuild checks before switching. (a) Count: the rows of `table` against the live entities
 * the events read leave (entities with a handled event whose last event, by source version, is
 * not a delete). (b) Sample: `sample` live entities at random, each one's row of `table` handed to
 * `check` with its source row (what `source` returns).
 */
export interface RebuildValidation {
  /** The projection's table (in the generation's schema) holding one row per live entity. */
  readonly table: string;
  /** Its column holding the entity id (compared as text). @default 'id' */
  readonly key?: string;
  /** Count and sample only entities of this type. @default every entity type */
  readonly entityType?: string;
  /** How many live entities to compare with their source rows; needs `source` and `check`. @default 20 when `check` is given */
  readonly sample?: number;
  /** Reads a sampled entity's source row (e.g. from the source database); `null` when it has none. */
  readonly source?: (entity: { readonly type: string; readonly id: string }) => Promise<ProjectionRow | null> | ProjectionRow | null;
  /** Compares: returns what differs (a string), or nothing when they agree; throwing counts as differing. */
  readonly check?: (row: ProjectionRow, source: ProjectionRow | null, entity: { readonly type: string; readonly id: string }) => string | void | null | Promise<string | void | null>;
}

export interface RebuildOptions extends GenerationStoreOptions {
  readonly projection: Projection<any>;
  /** KurrentDB connection string. */
  readonly kurrentdb: string;
  /** The freshness point: the events up to it (inclusive) are loaded. @default 'head' (the last event of `$all` when the rebuild starts) */
  readonly to?: 'head' | AllPosition;
  /** @default no validation: the generation is switched in once loaded */
  readonly validate?: RebuildValidation;
  /** As the runner's. @default no validation */
  readonly contracts?: { readonly dir: string; readonly upcasters?: readonly Upcaster[] };
  /** Ends the rebuild (the generation is marked failed, readers stay where they are). */
  readonly signal?: AbortSignal;
  /** @default silent */
  readonly logger?: ProjectionLogger;
  /**
   * Told where the rebuild is: once the generation is registered, after each batch loaded, then
   * when validating and when switching (a throw fails the rebuild). @default none
   */
  readonly onProgress?: (progress: RebuildProgress) => void;
}

/** Where a rebuild is (`RebuildOptions.onProgress`). */
export interface RebuildProgress {
  readonly projection: string;
  /** The generation being built. */
  readonly generation: number;
  /** `loading`: reading the events and applying them; `validating`; `switching`: the readers' views. */
  readonly phase: 'loading' | 'validating' | 'switching';
  /** Events the projection selected so far (all of them from `validating` on). */
  readonly read: number;
  /** `$all` read up to: while `loading` the last event of the batch just applied (`null` before the first), then the freshness point. */
  readonly position: AllPosition | null;
  /** The freshness point (`null`: `$all` was empty). */
  readonly to: AllPosition | null;
}

export interface RebuildResult {
  readonly projection: string;
  /** The new serving generation. */
  readonly generation: number;
  /** The generation that served before (kept, `standby`, for rollback); `null` for the first. */
  readonly previous: number | null;
  /** The schema readers use: `<name>`, views over the serving generation's tables. */
  readonly readerSchema: string;
  readonly position: AllPosition | null;
  /** Events the projection selected up to the freshness point, and what became of them. */
  readonly events: { readonly read: number; readonly applied: number; readonly unhandled: number; readonly skipped: number; readonly parked: number };
  /** `null` without `validate`. */
  readonly validation: { readonly entities: number; readonly rows: number; readonly sampled: number } | null;
}

export interface RollbackOptions extends GenerationStoreOptions {
  /** The projection's name. */
  readonly projection: string;
  /** The generation to serve again. @default the one that served before the serving one */
  readonly to?: number;
}

export interface RollbackResult {
  readonly projection: string;
  /** Serving now. */
  readonly generation: number;
  /** Served until now, `standby`. */
  readonly from: number;
}
