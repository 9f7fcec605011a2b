// The public shapes of the embedded PostgreSQL rig (`event-assembler/testing`): options, the
// running server, the per-test database, connection and role options. Types only; postgres.ts
// re-exports them.
import type pg from 'pg';

export type ParameterValue = string | number | boolean;

export interface EmbeddedPostgresOptions {
  /** TCP port on 127.0.0.1. Default: a free port found at start-up. */
  port?: number;
  /** Extra server settings written to postgresql.conf, e.g. `{ max_slot_wal_keep_size: '64MB' }`. Default: none. */
  parameters?: Record<string, ParameterValue>;
  /**
   * Directory for the cluster (`<baseDir>/data`) and its log (`<baseDir>/postgres.log`).
   * Default: a new directory under `os.tmpdir()`, removed by `destroy()`. A given directory
   * is kept; `destroy()` removes only what the rig created inside it. As root, the rig adds
   * search permission for others (o+x) to it so the server's OS user can reach `data/`;
   * its parent directories must already be traversable.
   */
  baseDir?: string;
}

/** What vitest's globalSetup provides to test files (`inject('postgres')`). Plain data. */
export interface PostgresServerInfo {
  host: string;
  port: number;
  superuser: string;
  password: string;
}

export interface ConnectionOptions {
  /** Default: `postgres`. */
  database?: string;
  /** Default: the superuser. */
  user?: string;
  /** Default: the server's password (roles made by `createRole` get it too unless told otherwise). */
  password?: string;
}

export interface RoleOptions {
  /** Default: the server's password, so `connectionConfig({ user })` works without one. */
  password?: string;
  /** Default: true. */
  login?: boolean;
  /** Default: false. */
  replication?: boolean;
  /** Default: false. */
  superuser?: boolean;
}

export interface EmbeddedPostgres {
  readonly host: string;
  readonly port: number;
  readonly superuser: string;
  readonly password: string;
  readonly dataDir: string;
  /** The server's stderr log (start-up, crash recovery, errors). */
  readonly logFile: string;
  /** PID of the running postmaster, or `undefined` when stopped. */
  readonly pid: number | undefined;
  connectionString(opts?: ConnectionOptions): string;
  connectionConfig(opts?: ConnectionOptions): pg.ClientConfig;
  /** Runs one statement as the superuser on a short-lived client and returns its rows. */
  query<R = any>(sql: string, params?: unknown[], opts?: { database?: string }): Promise<R[]>;
  createDatabase(name: string): Promise<void>;
  createRole(name: string, opts?: RoleOptions): Promise<void>;
  /**
   * `ALTER SYSTEM SET` each parameter, then reload and wait until new sessions see the
   * reloaded configuration. Restarts when a parameter needs it (`pending_restart`).
   * `restart: true` always restarts; `restart: false` never does (the value then applies
   * at the next start).
   */
  setParameters(params: Record<string, ParameterValue>, opts?: { restart?: boolean }): Promise<void>;
  /** Fast shutdown (SIGINT): active transactions are rolled back, a shutdown checkpoint is written. */
  stop(): Promise<void>;
  /** SIGKILL the postmaster, then wait until the port is closed and every server process is gone. */
  crash(): Promise<void>;
  /** Starts on the same data directory and port; after `crash()` this runs crash recovery. */
  start(): Promise<void>;
  restart(): Promise<void>;
  /** Stops if running and removes what the rig created on disk. Idempotent. */
  destroy(): Promise<void>;
}

export interface TestDatabase {
  readonly database: string;
  readonly connectionString: string;
  /** Superuser connection settings for this database; `opts` switch the user. */
  connectionConfig(opts?: Omit<ConnectionOptions, 'database'>): pg.ClientConfig;
  /** Runs one statement as the superuser in this database. */
  query<R = any>(sql: string, params?: unknown[]): Promise<R[]>;
  /** Drops the database's replication slots, then the database (terminating its sessions). */
  drop(): Promise<void>;
}
