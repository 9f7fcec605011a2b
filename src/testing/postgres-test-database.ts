// A database per test file on the shared rig server (vitest's globalSetup provides the server
// through `inject('postgres')`), and its cleanup: replication slots first (a database with logical
// slots cannot be dropped), then the database.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { waitUntil } from './postgres-process.js';
import { connectionConfigFor, connectionStringFor, runQuery } from './postgres-sql.js';
import type { PostgresServerInfo, TestDatabase } from './postgres-types.js';

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
      await dropReplicationSlots(admin, database);
      await runQuery(admin, `DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`);
      dropped = true;
    },
  };
}

/** A database with logical slots cannot be dropped; active ones must lose their walsender first. */
async function dropReplicationSlots(admin: pg.ClientConfig, database: string): Promise<void> {
  await runQuery(admin, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, [database]);
  await waitUntil(
    async () => {
      await runQuery(admin, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, [database]);
      const left = await runQuery(admin, `SELECT 1 FROM pg_replication_slots WHERE database = $1`, [database]);
      return left.length === 0;
    },
    { timeoutMs: 30_000, description: `the replication slots of ${database} to be dropped` },
  );
}
