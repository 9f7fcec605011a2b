// Where a consumer child was when it was killed, read from its PostgreSQL backend: the child is
// frozen with SIGSTOP first, so its backend's state and last statement (pg_stat_activity, found by
// the child's application_name) show the point the SIGKILL that follows lands on. A statement the
// backend was still executing finishes (the frozen client sends nothing more), so the probe waits
// for the backend to leave `active`.
import type pg from 'pg';

export type KillWindow =
  | 'start-up (no connection yet)'
  | 'start-up (state tables, setup)'
  | 'between transactions'
  | 'in a batch, before its effects'
  | 'between effect and checkpoint'
  | 'checkpoint moved, before COMMIT';

export interface BackendView {
  readonly pid: number;
  readonly state: string;
  readonly inTransaction: boolean;
  readonly query: string;
}

/** The backend of `applicationName`, or null when it has none (not connected yet, or gone). */
export async function backendOf(pool: pg.Pool, applicationName: string): Promise<BackendView | null> {
  const { rows } = await pool.query<{ pid: number; state: string; in_transaction: boolean; query: string }>(
    `SELECT pid, state, xact_start IS NOT NULL AS in_transaction, query FROM pg_stat_activity WHERE application_name = $1`,
    [applicationName],
  );
  const row = rows[0];
  return row ? { pid: row.pid, state: row.state, inTransaction: row.in_transaction, query: row.query } : null;
}

/** Waits (deadline) until the backend of `applicationName` has left `active`; returns what it shows then. */
export async function settledBackend(pool: pg.Pool, applicationName: string, timeoutMs = 5_000): Promise<BackendView | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const view = await backendOf(pool, applicationName);
    if (view === null || view.state !== 'active' || Date.now() > deadline) return view;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Waits (deadline) until PostgreSQL has ended the killed child's backend (its transaction rolled back). */
export async function backendGone(pool: pg.Pool, applicationName: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await backendOf(pool, applicationName)) !== null) {
    if (Date.now() > deadline) throw new Error(`the backend of ${applicationName} was still there ${timeoutMs} ms after the kill`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Names the window from the backend's state and last statement (see the runner's batch steps in docs/consumers.md). */
export function windowOf(view: BackendView | null): KillWindow {
  if (view === null) return 'start-up (no connection yet)';
  const q = view.query.replace(/\s+/g, ' ');
  if (/CREATE |pg_advisory_xact_lock/.test(q)) return 'start-up (state tables, setup)';
  if (!view.inTransaction) return /^(COMMIT|ROLLBACK)/.test(q) ? 'between transactions' : 'start-up (state tables, setup)';
  if (/^UPDATE \S*projection_checkpoints/.test(q)) return 'checkpoint moved, before COMMIT';
  if (/^INSERT INTO \S*(balances|applied_events|projection_receipts|projection_entity_versions)/.test(q)) return 'between effect and checkpoint';
  return 'in a batch, before its effects';
}
