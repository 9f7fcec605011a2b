// Server settings of the embedded PostgreSQL rig: the defaults every rig server gets, how a value
// is written in postgresql.conf or ALTER SYSTEM, and changing settings on a running server
// (ALTER SYSTEM, reload, and waiting until new sessions see it).
import pg from 'pg';
import { waitUntil } from './postgres-process.js';
import { runQuery } from './postgres-sql.js';
import type { ParameterValue } from './postgres-types.js';

/** The rig listens on loopback only. */
export const HOST = '127.0.0.1';

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
export const DEFAULT_PARAMETERS: Record<string, ParameterValue> = {
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

export function checkParameterName(name: string): void {
  if (!PARAMETER_NAME.test(name)) throw new Error(`Invalid PostgreSQL parameter name: ${JSON.stringify(name)}`);
}

export function parameterLiteral(value: ParameterValue): string {
  if (typeof value === 'boolean') return value ? 'on' : 'off';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`Invalid PostgreSQL parameter value: ${value}`);
    return String(value);
  }
  return pg.escapeLiteral(value);
}

/** postgresql.conf lines (`name = literal`), names checked. */
export function configurationLines(parameters: Record<string, ParameterValue>): string[] {
  return Object.entries(parameters).map(([name, value]) => {
    checkParameterName(name);
    return `${name} = ${parameterLiteral(value)}`;
  });
}

/**
 * `ALTER SYSTEM SET` each parameter as the superuser, reload, and wait until new sessions see the
 * reloaded configuration. Returns the names among them that still need a restart (`pending_restart`).
 */
export async function alterSystem(config: pg.ClientConfig, params: Record<string, ParameterValue>): Promise<string[]> {
  const names = Object.keys(params);
  names.forEach(checkParameterName);
  const client = new pg.Client(config);
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
  return waitUntil(
    async () => {
      const rows = await runQuery<{ t: string; pending: string[] | null }>(
        config,
        `SELECT pg_conf_load_time()::text AS t,
                (SELECT array_agg(name::text) FROM pg_settings WHERE pending_restart AND name = ANY($1)) AS pending`,
        [names.map((n) => n.toLowerCase())],
      );
      const row = rows[0]!;
      return row.t !== loadedBefore ? (row.pending ?? []) : undefined;
    },
    { timeoutMs: 30_000, description: 'the server to reload its configuration' },
  );
}
