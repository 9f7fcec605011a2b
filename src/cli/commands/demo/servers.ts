// The two servers: PostgreSQL 17 (embedded, or yours with --source) and KurrentDB (in-memory,
// or yours with --kurrentdb). The ones started here are stopped by the run's cleanups.
import { startInMemoryKurrentDB } from '../../../testing/kurrentdb/index.js';
import { startEmbeddedPostgres } from '../../../testing/postgres.js';
import type { Cleanups } from './cleanups.js';
import { redact } from './connections.js';
import type { DemoOptions, Say } from './types.js';
import { throwIfInterrupted } from './wait.js';

export interface DemoServers {
  /** Administrator connection to the source database. */
  readonly admin: string;
  readonly kurrentdb: string;
}

export async function startServers(options: DemoOptions, cleanups: Cleanups, say: Say, signal: AbortSignal): Promise<DemoServers> {
  let admin: string;
  let pgLabel: string;
  if (options.source) {
    admin = options.source;
    pgLabel = `PostgreSQL at ${redact(admin)}`;
  } else {
    say('starting PostgreSQL 17 (embedded, wal_level=logical)…');
    const server = await startEmbeddedPostgres();
    cleanups.push('PostgreSQL', () => server.destroy());
    await server.createDatabase('invoicing');
    admin = server.connectionString({ database: 'invoicing' });
    pgLabel = `PostgreSQL 17 on ${server.host}:${server.port} (embedded)`;
  }
  throwIfInterrupted(signal);
  let kurrentdb: string;
  let kurrentLabel: string;
  if (options.kurrentdb) {
    kurrentdb = options.kurrentdb;
    kurrentLabel = `KurrentDB at ${redact(kurrentdb)}`;
  } else {
    const server = await startInMemoryKurrentDB();
    cleanups.push('KurrentDB', () => server.close());
    kurrentdb = server.connectionString;
    kurrentLabel = `in-memory KurrentDB on 127.0.0.1:${server.port}`;
  }
  say(`source: ${pgLabel}; destination: ${kurrentLabel}`);
  throwIfInterrupted(signal);
  return { admin, kurrentdb };
}
