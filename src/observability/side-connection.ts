/**
 * The observability's own small PostgreSQL connection — not the replication session: it reads
 * the slot's signals and writes heartbeats. Opened on first use; after any failure (or a timed
 * out query, which leaves the connection busy) it is dropped and the next use opens a new one, so
 * a database restart costs one failed reading, never a stuck one.
 */
import pg from 'pg';
import { connectSource } from '../source/connect-source.js';

export interface SideConnection {
  /** Runs `use` on the connection (opened if needed); a failure drops the connection. */
  use<T>(use: (client: pg.Client) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export function createSideConnection(connection: string, options: { readonly timeoutMs: number; readonly applicationName: string }): SideConnection {
  let client: Promise<pg.Client> | null = null;
  let closed = false;

  function drop(which: Promise<pg.Client> | null): void {
    if (which === null || client !== which) return;
    client = null;
    void which.then((c) => c.end()).catch(() => undefined);
  }

  function open(): Promise<pg.Client> {
    const opened: Promise<pg.Client> = connectSource(connection, {
      extra: {
        connectionTimeoutMillis: options.timeoutMs,
        // Every query is bounded: a scrape or a heartbeat never hangs on a stuck server.
        query_timeout: options.timeoutMs,
        application_name: options.applicationName,
      },
    }).then((c) => {
      // A connection lost between uses (server restart, failover): the next use opens a new one.
      c.on('error', () => drop(opened));
      return c;
    });
    return opened;
  }

  return {
    async use(use) {
      if (closed) throw new Error('observability connection closed');
      client ??= open();
      const mine = client;
      try {
        return await use(await mine);
      } catch (error) {
        drop(mine);
        throw error;
      }
    },
    async close() {
      closed = true;
      const old = client;
      client = null;
      await old?.then((c) => c.end()).catch(() => undefined);
    },
  };
}
