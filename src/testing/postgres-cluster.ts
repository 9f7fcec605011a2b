// A rig server's postmaster as a process this process owns: start (spawn, wait until it accepts
// connections, choose another free port if the one found was taken meanwhile), fast stop, crash
// (SIGKILL), restart and destroy on the same data directory — waiting each time until every
// server process of the cluster is gone. SQL conveniences delegate to postgres-sql.ts and
// postgres-parameters.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs, closeSync, openSync } from 'node:fs';
import pg from 'pg';
import { registerPostmaster, unregisterPostmaster } from './live-postmasters.js';
import { serverEnv, SUPERUSER, type ClusterLayout } from './postgres-init.js';
import { alterSystem, HOST } from './postgres-parameters.js';
import { clusterProcesses, findFreePort, isPortOpen, tailOfFile, waitUntil, type ServerUser } from './postgres-process.js';
import { connectionConfigFor, connectionStringFor, createRoleStatement, runQuery } from './postgres-sql.js';
import type { ConnectionOptions, EmbeddedPostgres, ParameterValue, RoleOptions } from './postgres-types.js';

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 60_000;

export class PostgresCluster implements EmbeddedPostgres {
  readonly host = HOST;
  readonly superuser = SUPERUSER;
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private destroyed = false;
  private portValue: number | undefined;
  /** A port given in the options is kept; one found free may be chosen again until the first start. */
  private readonly fixedPort: boolean;
  private startedOnce = false;

  readonly dataDir: string;
  readonly logFile: string;

  constructor(
    private readonly postgresBin: string,
    private readonly user: ServerUser,
    private readonly layout: ClusterLayout,
    readonly password: string,
    requestedPort: number | undefined,
  ) {
    this.dataDir = layout.dataDir;
    this.logFile = layout.logFile;
    this.portValue = requestedPort;
    this.fixedPort = requestedPort !== undefined;
  }

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
    await this.query(createRoleStatement(name, opts, this.password));
  }

  async setParameters(params: Record<string, ParameterValue>, opts: { restart?: boolean } = {}): Promise<void> {
    const pending = await alterSystem(this.connectionConfig(), params);
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
        if (child.pid !== undefined) unregisterPostmaster(child.pid);
        if (this.child === child) this.child = undefined;
        resolve();
      });
      child.once('error', (err) => {
        spawnError = err;
        resolve();
      });
    });
    this.child = child;
    if (child.pid !== undefined) registerPostmaster(child.pid, this.layout.ownsBaseDir ? this.layout.baseDir : undefined);
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
      if (this.layout.ownsBaseDir) {
        await fs.rm(this.layout.baseDir, { recursive: true, force: true });
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
