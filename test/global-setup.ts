// One embedded PostgreSQL 17 for the whole vitest run. Test files get its address through
// `inject('postgres')` and make their own database with `createTestDatabase`. Files that
// stop, crash or reconfigure a server start their own with `startEmbeddedPostgres`.
// The CLI that tests start as child processes is transpiled once here (test/support/cli-build.ts);
// workers find it through the environment they inherit.
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type PostgresServerInfo } from '../src/testing/postgres.js';
import { buildTestCli, TEST_CLI_ENV } from './support/cli-build.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgres: PostgresServerInfo;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cli = await buildTestCli(fileURLToPath(new URL('..', import.meta.url)));
  process.env[TEST_CLI_ENV] = cli.entry;
  const server = await startEmbeddedPostgres().catch((error: unknown) => {
    cli.remove();
    throw error;
  });
  project.provide('postgres', {
    host: server.host,
    port: server.port,
    superuser: server.superuser,
    password: server.password,
  });
  return async () => {
    await server.destroy();
    cli.remove();
  };
}
