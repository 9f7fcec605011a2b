/**
 * The host walk: node-postgres connects to one host, so a source connection naming several
 * (multi-host.ts) is tried host by host, in order, and the first that accepts — and, unless
 * `target_session_attrs=any`, is not in recovery (`pg_is_in_recovery()`, a standby) — is taken.
 * Every connection to the source goes through here: capture (the replication connection), the
 * start-up checks, snapshots, and the side connections of status, heartbeats and the leader lock.
 * So after a failover the next connection finds the promoted standby without a configuration change.
 */
import pg from 'pg';
import { parseSourceHosts, type SourceHost } from './multi-host.js';
import { isRetryable } from './replication/reconnect-policy.js';

/**
 * No host of a multi-host connection gave a usable session, and each failed for a reason that
 * waiting may cure (refused, unreachable, a standby not yet promoted). SQLSTATE 08001
 * (sqlclient_unable_to_establish_sqlconnection), as libpq reports it: retried like a lost connection.
 */
export class NoPrimaryHostError extends Error {
  readonly code = '08001';
  constructor(
    readonly attempts: readonly { readonly host: string; readonly reason: string }[],
    readonly errors: readonly unknown[],
  ) {
    super(`no host of source.connection accepted a read-write session: ${attempts.map((a) => `${a.host} ${a.reason}`).join('; ')}`);
    this.name = 'NoPrimaryHostError';
  }
}

export interface ConnectSourceOptions {
  /** Settings added to every host's (replication, timeouts, application_name). */
  readonly extra?: Partial<pg.ClientConfig> & { readonly replication?: 'database' };
  /** Aborts a connection attempt in progress (pg's connect() does not settle when end() is called meanwhile). */
  readonly signal?: AbortSignal;
}

const noop = (): void => undefined;

function hostName(h: SourceHost): string {
  return h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`;
}

function reasonOf(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown };
  const message = typeof e?.message === 'string' && e.message !== '' ? e.message : String(error);
  return typeof e?.code === 'string' && !message.includes(e.code) ? `${e.code}: ${message}` : message;
}

async function connectOne(config: pg.ClientConfig, signal: AbortSignal | undefined): Promise<pg.Client> {
  const client = new pg.Client(config);
  client.on('error', noop);
  if (signal?.aborted) throw new Error('Connection terminated: connecting was aborted');
  let onAbort = noop;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => {
      void client.end().catch(noop);
      reject(new Error('Connection terminated: connecting was aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(noop);
  try {
    await Promise.race([client.connect(), aborted]);
    return client;
  } catch (error) {
    await client.end().catch(noop);
    throw error;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/** Whether the server is in recovery (a standby); works on replication connections too. */
async function inRecovery(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query<{ r: boolean }>('SELECT pg_catalog.pg_is_in_recovery() AS r');
  return rows[0]?.r === true;
}

/**
 * A connected client to the source's primary (see the file's comment). With one host and no
 * `target_session_attrs` it is a plain `connect()`, its error unchanged. With several: the first
 * refusal that waiting does not cure (a wrong password) is thrown as it is; when every host failed
 * for a curable reason, a NoPrimaryHostError naming each host and why.
 */
export async function connectSource(connection: string | pg.ClientConfig, options: ConnectSourceOptions = {}): Promise<pg.Client> {
  const target = parseSourceHosts(connection);
  const attempts: { host: string; reason: string }[] = [];
  const errors: unknown[] = [];
  for (const [i, config] of target.configs.entries()) {
    const host = hostName(target.hosts[i]!);
    let client: pg.Client;
    try {
      client = await connectOne({ ...config, ...options.extra } as pg.ClientConfig, options.signal);
    } catch (error) {
      if (target.configs.length === 1 || options.signal?.aborted) throw error;
      if (!isRetryable(error)) throw error;
      attempts.push({ host, reason: `failed (${reasonOf(error)})` });
      errors.push(error);
      continue;
    }
    if (target.targetSessionAttrs === 'any') return client;
    let standby: boolean;
    try {
      standby = await inRecovery(client);
    } catch (error) {
      await client.end().catch(noop);
      if (!isRetryable(error)) throw error;
      attempts.push({ host, reason: `failed (${reasonOf(error)})` });
      errors.push(error);
      continue;
    }
    if (!standby) return client;
    await client.end().catch(noop);
    attempts.push({ host, reason: 'is in recovery (a standby)' });
    errors.push(new Error(`${host} is in recovery`));
  }
  throw new NoPrimaryHostError(attempts, errors);
}

/** Runs `use` on a connection to the source's primary, closed afterwards whatever happens. */
export async function withSourceClient<T>(connection: string | pg.ClientConfig, use: (client: pg.Client) => Promise<T>, options: ConnectSourceOptions = {}): Promise<T> {
  const client = await connectSource(connection, options);
  try {
    return await use(client);
  } finally {
    await client.end().catch(noop);
  }
}
