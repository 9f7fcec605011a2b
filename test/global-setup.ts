// One embedded PostgreSQL 17 for the whole vitest run. Test files get its address through
// `inject('postgres')` and make their own database with `createTestDatabase`. Files that
// stop, crash or reconfigure a server start their own with `startEmbeddedPostgres`.
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type PostgresServerInfo } from '../src/testing/postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgres: PostgresServerInfo;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startEmbeddedPostgres();
  project.provide('postgres', {
    host: server.host,
    port: server.port,
    superuser: server.superuser,
    password: server.password,
  });
  return async () => {
    await server.destroy();
  };
}
