// One PostgreSQL connection that writes transactions across server restarts: a transaction cut
// by a lost connection is tried again, and a COMMIT whose answer was lost is resolved by looking
// for the transaction's own marker row — so the caller learns exactly which transactions
// committed, each once. For the chaos run's writer (chaos-writer.ts).
//
// Why a marker row and not `pg_xact_status(xid)`: after an immediate shutdown (a crash), an xid
// handed out but never written to disk may be handed out again by the recovered server, so the
// status found could be another transaction's. The marker (`MARKER_TABLE`, a table in no
// publication: it makes no event) commits with the transaction or not at all.
import pg from 'pg';
import { isRetryable } from '../../src/source/replication/reconnect-policy.js';

/** What one committed transaction did: rows changed, and events the invoicing mappers make of it (by type). */
export interface WriteResult {
  readonly rows: number;
  readonly events: Readonly<Record<string, number>>;
}

export interface ResilientStats {
  /** Attempts repeated after a lost connection. */
  retries: number;
  /** COMMITs whose answer was lost, by what the server said of them afterwards. */
  unknownCommitted: number;
  unknownAborted: number;
}

export interface ResilientConnection {
  /** Runs `write` in a transaction until it commits; resolves with its result. Rejects on an error that is not a lost connection. */
  transaction(write: (client: pg.Client) => Promise<WriteResult>): Promise<WriteResult>;
  close(): Promise<void>;
}

/** The table of commit markers; create it with `MARKER_TABLE_SQL` before writing. */
export const MARKER_TABLE = 'chaos_commit_marker';
export const MARKER_TABLE_SQL = `CREATE TABLE IF NOT EXISTS ${MARKER_TABLE} (id text PRIMARY KEY)`;

/** A lost connection or a server going away (also pg's own "not queryable" after a socket error). */
export function isConnectionLoss(error: unknown): boolean {
  if (isRetryable(error)) return true;
  const message = error instanceof Error ? error.message : String(error);
  return /not queryable|Connection terminated|connection (is )?closed|Client was closed|timeout expired/i.test(message);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `deadlineMs`: the longest a transaction may wait for the server to come back. */
export function createResilientConnection(config: pg.ClientConfig, stats: ResilientStats, name: string, deadlineMs = 120_000): ResilientConnection {
  let client: pg.Client | null = null;
  let closed = false;
  /** Markers are unique per connection name and transaction (a run uses each name once). */
  let sequence = 0;

  async function connected(deadline: number): Promise<pg.Client> {
    for (let attempt = 0; ; attempt++) {
      if (closed) throw new Error(`${name}: closed`);
      if (client) return client;
      const made = new pg.Client({ ...config, application_name: name, connectionTimeoutMillis: 2_000 });
      made.on('error', () => undefined); // a lost connection surfaces as the failing query
      try {
        await made.connect();
        client = made;
        return made;
      } catch (error) {
        await made.end().catch(() => undefined);
        if (!isConnectionLoss(error) || Date.now() > deadline) throw error;
        await sleep(Math.min(1_000, 50 * 2 ** attempt));
      }
    }
  }

  function drop(): void {
    const old = client;
    client = null;
    void old?.end().catch(() => undefined);
  }

  /**
   * Whether the transaction with `marker` committed, its COMMIT unanswered: asked on a new
   * connection once the server is back and the old session (`pid`) is gone — a session still
   * committing would make the answer premature.
   */
  async function outcome(marker: string, pid: number, deadline: number): Promise<'committed' | 'aborted'> {
    for (;;) {
      try {
        const c = await connected(deadline);
        const row = (
          await c.query<{ gone: boolean; committed: boolean }>(
            `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND pid <> pg_backend_pid() AND application_name = $2) AS gone,
                    EXISTS (SELECT 1 FROM ${MARKER_TABLE} WHERE id = $3) AS committed`,
            [pid, name, marker],
          )
        ).rows[0]!;
        if (row.gone) return row.committed ? 'committed' : 'aborted';
      } catch (error) {
        if (!isConnectionLoss(error) || Date.now() > deadline) throw error;
        drop();
      }
      await sleep(50);
    }
  }

  return {
    async transaction(write) {
      const deadline = Date.now() + deadlineMs;
      for (let attempt = 0; ; attempt++) {
        const marker = `${name}:${++sequence}`;
        let pid: number | null = null;
        let result: WriteResult | null = null;
        let c: pg.Client | null = null;
        try {
          c = await connected(deadline);
          await c.query('BEGIN');
          pid = (await c.query<{ pid: number }>(`INSERT INTO ${MARKER_TABLE} (id) VALUES ($1) RETURNING pg_backend_pid() AS pid`, [marker])).rows[0]!.pid;
          result = await write(c);
          await c.query('COMMIT');
          return result;
        } catch (error) {
          if (!isConnectionLoss(error)) {
            await c?.query('ROLLBACK').catch(() => undefined);
            throw error;
          }
          drop();
          if (Date.now() > deadline) throw new Error(`${name}: the server did not come back within ${deadlineMs} ms`, { cause: error });
          // Only a COMMIT sent and unanswered is in doubt: anything cut earlier never committed.
          if (result !== null && pid !== null) {
            if ((await outcome(marker, pid, deadline)) === 'committed') {
              stats.unknownCommitted += 1;
              return result;
            }
            stats.unknownAborted += 1;
          }
          stats.retries += 1;
          await sleep(Math.min(1_000, 50 * 2 ** attempt));
        }
      }
    },
    async close() {
      closed = true;
      const old = client;
      client = null;
      await old?.end().catch(() => undefined);
    },
  };
}
