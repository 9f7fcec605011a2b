// Talking to a rig server as a client: connection settings and connection strings for a user and
// a database, one-statement queries on a short-lived client, and the CREATE ROLE statement.
import pg from 'pg';
import type { ConnectionOptions, PostgresServerInfo, RoleOptions } from './postgres-types.js';

export function connectionConfigFor(server: PostgresServerInfo, opts: ConnectionOptions = {}): pg.ClientConfig {
  return {
    host: server.host,
    port: server.port,
    user: opts.user ?? server.superuser,
    password: opts.password ?? server.password,
    database: opts.database ?? 'postgres',
  };
}

export function connectionStringFor(server: PostgresServerInfo, opts: ConnectionOptions = {}): string {
  const c = connectionConfigFor(server, opts);
  const user = encodeURIComponent(c.user ?? '');
  const password = encodeURIComponent(String(c.password ?? ''));
  return `postgresql://${user}:${password}@${server.host}:${server.port}/${encodeURIComponent(c.database ?? 'postgres')}`;
}

export async function runQuery<R>(config: pg.ClientConfig, sql: string, params?: unknown[]): Promise<R[]> {
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

/** `CREATE ROLE`; a login role without a password of its own gets `serverPassword`. */
export function createRoleStatement(name: string, opts: RoleOptions, serverPassword: string): string {
  const login = opts.login ?? true;
  const flags = [
    login ? 'LOGIN' : 'NOLOGIN',
    opts.replication ? 'REPLICATION' : 'NOREPLICATION',
    opts.superuser ? 'SUPERUSER' : 'NOSUPERUSER',
  ];
  const password = opts.password ?? (login ? serverPassword : undefined);
  if (password !== undefined) flags.push(`PASSWORD ${pg.escapeLiteral(password)}`);
  return `CREATE ROLE ${pg.escapeIdentifier(name)} WITH ${flags.join(' ')}`;
}
