// One active instance per projection partition: a PostgreSQL session advisory lock, held by the
// runner's own connection — the one its batches commit on. Another instance either stops
// (`ProjectionConflictError`, naming the holder) or, as a standby, tries again until the lock is
// free: when the active instance stops, crashes or loses its connection, PostgreSQL releases the
// lock with the session, and no batch of the old instance can commit any more (its session is
// gone). The checkpoint's compare-and-set stays the guard against writers that take no lease.
import type pg from 'pg';

/** The first half of every lease's lock key: the kit's advisory locks apart from anybody else's. */
const LEASE_SPACE = 'event-assembler projection lease';

/** Who holds a lease, from `pg_locks` and `pg_stat_activity`. */
export interface LeaseHolder {
  readonly pid: number;
  readonly applicationName: string | null;
  readonly clientAddress: string | null;
  readonly since: string | null;
}

/** The lease's name: state schema, the projection's key in it, the partition. */
export function leaseName(stateSchema: string, key: string, partition: string): string {
  return `${stateSchema}.${key} ${partition}`;
}

/** Takes the lease if it is free (or already this session's). */
export async function tryLease(client: pg.ClientBase, name: string): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1), hashtext($2)) AS ok', [LEASE_SPACE, name]);
  return rows[0]!.ok;
}

/** Gives the lease back (a client returned to a pool would otherwise keep it). */
export async function releaseLease(client: pg.ClientBase, name: string): Promise<void> {
  await client.query('SELECT pg_advisory_unlock(hashtext($1), hashtext($2))', [LEASE_SPACE, name]);
}

/** The session holding the lease, or null (free, or not visible to this role). */
export async function leaseHolder(client: pg.ClientBase, name: string): Promise<LeaseHolder | null> {
  const { rows } = await client.query<{ pid: number; application_name: string | null; client_addr: string | null; backend_start: Date | null }>(
    `SELECT l.pid, a.application_name, a.client_addr::text, a.backend_start
       FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid = hashtext($1)::oid AND l.objid = hashtext($2)::oid`,
    [LEASE_SPACE, name],
  );
  const row = rows[0];
  if (!row) return null;
  return { pid: row.pid, applicationName: row.application_name || null, clientAddress: row.client_addr, since: row.backend_start?.toISOString() ?? null };
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Tries the lease every `pollMs` until it is taken (true) or `signal` aborts (false). `onWait` runs once, before the first wait. */
export async function awaitLease(client: pg.ClientBase, name: string, pollMs: number, signal: AbortSignal, onWait: () => Promise<void>): Promise<boolean> {
  let waiting = false;
  while (!signal.aborted) {
    if (await tryLease(client, name)) return true;
    if (!waiting) {
      waiting = true;
      await onWait();
    }
    await pause(pollMs, signal);
  }
  return false;
}
