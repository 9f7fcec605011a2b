// Dropping a test's capture role afterwards (roles are cluster-wide: the database's drop leaves them).
import pg from 'pg';
import { inject } from 'vitest';

/** Drops `role` on the run's shared PostgreSQL, as its superuser. */
export async function dropRole(role: string): Promise<void> {
  const server = inject('postgres');
  const admin = new pg.Client({ host: server.host, port: server.port, user: server.superuser, password: server.password, database: 'postgres' });
  await admin.connect();
  try {
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
  } finally {
    await admin.end();
  }
}
