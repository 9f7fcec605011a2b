// The ledger of the consumer crash test, shared by the test process and the consumer child
// (no vitest import here: the child runs under plain `node --import tsx`).
//
// - Source side: ledger rows (deposits and withdrawals of accounts) mapped by a real mapper
//   (`mapUnit`: standard metadata, deterministic event ids) and appended by the real sink, so the
//   events carry the metadata the assembler writes.
// - Consumer side: a projection whose effects are NOT idempotent — `balance = balance ± amount` —
//   and that appends every applied event to `applied_events` (no unique key: a double effect
//   shows as a duplicate row instead of failing). `onEffect` runs after both effects, still inside
//   the batch's transaction (before the receipts and the checkpoint's compare-and-set).
import { defineMapper } from '../../src/mapping/define-mapper.js';
import { mapUnit } from '../../src/mapping/map-unit.js';
import { createKurrentDBSink } from '../../src/sink/index.js';
import type { Sink } from '../../src/sink/types.js';
import { encodeCheckpoint } from '../../src/source/position.js';
import { insert, transaction } from '../../src/testing/mapper-kit.js';
import { defineProjection, type ProjectionContext, type ProjectionEvent } from '../../src/consumer/index.js';

export const LEDGER_SYSTEM_ID = '7400000000000000077';
export const LEDGER_PROJECTION = 'ledger_accounts';

export interface LedgerEntry {
  readonly account: string;
  readonly kind: 'deposit' | 'withdrawal';
  readonly amount: number;
}

export type LedgerEvents = { Deposited: { account: string; amount: number }; Withdrawn: { account: string; amount: number } };

const ledgerMapper = defineMapper({
  name: 'ledger',
  tables: { 'public.ledger': { columns: ['id', 'account', 'kind', 'amount'] } },
  map: (tx) =>
    tx.inserts('public.ledger').map(({ after: row }) => ({
      stream: `account-${String(row['account'])}`,
      entity: { type: 'account', id: String(row['account']) },
      type: row['kind'] === 'withdrawal' ? 'Withdrawn' : 'Deposited',
      version: 1,
      data: { account: row['account'], amount: row['amount'] },
    })),
});

export interface LedgerWriter {
  /** Maps and appends one source transaction of ledger rows; returns the number of events written. */
  write(entries: readonly LedgerEntry[]): Promise<number>;
  close(): Promise<void>;
}

/** Writes source transactions at increasing commit LSNs and xids, through the real sink. */
export async function createLedgerWriter(kurrentdb: string): Promise<LedgerWriter> {
  const sink: Sink = await createKurrentDBSink({ connectionString: kurrentdb, assembler: 'ledger-asm', checkpointStream: false });
  const context = { assembler: 'ledger-asm', sourceIdentity: LEDGER_SYSTEM_ID };
  let rowId = 0;
  let xid = 1000;
  let lsn = 0x100000;
  return {
    async write(entries) {
      xid++;
      lsn += 0x100;
      const commitLsn = `0/${lsn.toString(16).toUpperCase()}`;
      const changes = entries.map((e) => insert('public.ledger', { id: ++rowId, account: e.account, kind: e.kind, amount: e.amount }));
      const base = transaction(changes, { commitLsn, xid, systemId: LEDGER_SYSTEM_ID });
      const checkpoint = encodeCheckpoint({ systemId: LEDGER_SYSTEM_ID, timeline: 1, slot: 'ledger', commitLsn, xid });
      const { events } = mapUnit([ledgerMapper], { ...base, position: { ...base.position, checkpoint } }, context);
      await sink.append({ position: { checkpoint, commitLsn, xid, systemId: LEDGER_SYSTEM_ID }, events });
      return events.length;
    },
    close: () => sink.close(),
  };
}

/**
 * The projection the child runs: balances by increments and an append-only log of applied events.
 * `onEffect(event)` is awaited after an event's effects, inside the batch's transaction.
 */
export function ledgerProjection(onEffect: (event: ProjectionEvent) => Promise<void> = async () => {}) {
  const apply = async (event: ProjectionEvent<string, { account: string; amount: number }>, ctx: ProjectionContext, sign: 1 | -1) => {
    const { client, schema } = ctx;
    await client.query(`INSERT INTO "${schema}".balances (account, balance) VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET balance = balances.balance + EXCLUDED.balance`, [
      event.data.account,
      sign * event.data.amount,
    ]);
    await client.query(`INSERT INTO "${schema}".applied_events (event_id, stream, revision, amount, pid) VALUES ($1, $2, $3, $4, $5)`, [
      event.id,
      event.stream,
      String(event.revision),
      sign * event.data.amount,
      process.pid,
    ]);
    await onEffect(event);
  };
  return defineProjection<LedgerEvents>({
    name: LEDGER_PROJECTION,
    from: { categories: ['account'] },
    batchSize: 10,
    setup: async (client, schema) => {
      await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".balances (account text PRIMARY KEY, balance bigint NOT NULL)`);
      await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".applied_events (
        seq bigserial PRIMARY KEY, event_id uuid NOT NULL, stream text NOT NULL, revision bigint NOT NULL,
        amount bigint NOT NULL, pid integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    },
    handlers: {
      Deposited: (event, ctx) => apply(event, ctx, 1),
      Withdrawn: (event, ctx) => apply(event, ctx, -1),
    },
  });
}
