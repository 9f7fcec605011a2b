// PostgreSQL connection helpers for the demo: one short-lived client, a connection string for
// another role, a connection string fit to print.
import pg from 'pg';

export async function withClient<T>(connection: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: connection });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export function withUser(connection: string, user: string, password: string): string {
  const url = new URL(connection);
  url.username = encodeURIComponent(user);
  url.password = encodeURIComponent(password);
  return url.toString();
}

export function redact(connection: string): string {
  try {
    const url = new URL(connection);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(connection string)';
  }
}
