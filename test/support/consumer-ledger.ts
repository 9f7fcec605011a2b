// The consumer side of the consumer crash test's ledger, loaded by the consumer child (no vitest
// import here: the child runs under plain `node --import tsx`; the source side is
// consumer-ledger-writer.ts): a projection whose effects are NOT idempotent —
// `balance = balance ± amount` — and that appends every applied event to `applied_events` (no
// unique key: a double effect shows as a duplicate row instead of failing). `onEffect` runs after
// both effects, still inside the batch's transaction (before the receipts and the checkpoint's
// compare-and-set). `outside`, for a negative control only: a client the log row goes through
// instead (autocommit, outside the batch's transaction) — an effect the kit cannot undo, which the
// crash test must then report as applied twice.
import { defineProjection, type Atomicity, type ProjectionContext, type ProjectionEvent } from '../../src/consumer/index.js';

export const LEDGER_PROJECTION = 'ledger_accounts';

export type LedgerEvents = { Deposited: { account: string; amount: number }; Withdrawn: { account: string; amount: number } };

/**
 * The projection the child runs: balances by increments and an append-only log of applied events.
 * `onEffect(event)` is awaited after an event's effects, inside the batch's transaction.
 */
export function ledgerProjection(onEffect: (event: ProjectionEvent) => Promise<void> = async () => {}, outside?: Pick<ProjectionContext['client'], 'query'>, atomic: Atomicity = 'batch') {
  const apply = async (event: ProjectionEvent<string, { account: string; amount: number }>, ctx: ProjectionContext, sign: 1 | -1) => {
    const { client, schema } = ctx;
    await client.query(`INSERT INTO "${schema}".balances (account, balance) VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET balance = balances.balance + EXCLUDED.balance`, [
      event.data.account,
      sign * event.data.amount,
    ]);
    // `tx`: the PostgreSQL transaction it committed in (the atomic mode's check: one per source transaction).
    await (outside ?? client).query(
      `INSERT INTO "${schema}".applied_events (event_id, stream, revision, amount, pid, unit, atomic, tx) VALUES ($1, $2, $3, $4, $5, $6, $7, txid_current())`,
      [event.id, event.stream, String(event.revision), sign * event.data.amount, process.pid, event.transaction?.correlationId ?? null, atomic === 'transaction'],
    );
    await onEffect(event);
  };
  return defineProjection<LedgerEvents>({
    name: LEDGER_PROJECTION,
    from: { categories: ['account'] },
    batchSize: 10,
    atomic,
    setup: async (client, schema) => {
      await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".balances (account text PRIMARY KEY, balance bigint NOT NULL)`);
      await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".applied_events (
        seq bigserial PRIMARY KEY, event_id uuid NOT NULL, stream text NOT NULL, revision bigint NOT NULL,
        amount bigint NOT NULL, pid integer NOT NULL, unit text, atomic boolean NOT NULL, tx bigint NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    },
    handlers: {
      Deposited: (event, ctx) => apply(event, ctx, 1),
      Withdrawn: (event, ctx) => apply(event, ctx, -1),
    },
  });
}
