// PostgreSQL connection helpers for the demo: one short-lived client (the pipeline's), a
// connection string for another role, a connection string fit to print.
export { withClient } from '../../../pipeline/source-queries.js';

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
