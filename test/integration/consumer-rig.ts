// Shared rig of the consumer kit's tests: a database on the run's shared PostgreSQL, an in-memory
// KurrentDB, and business events written the way the assembler writes them — mapped by a real
// mapper (`mapUnit`: standard metadata, deterministic ids) and appended by the real sink (receipts).
// The projection keeps account balances by increments, so a double effect shows.
import { inject } from 'vitest';
import pg from 'pg';
import { KurrentDBClient, START, FORWARDS } from '@kurrent/kurrentdb-client';
import { defineMapper } from '../../src/mapping/define-mapper.js';
import { mapUnit } from '../../src/mapping/map-unit.js';
import { createKurrentDBSink } from '../../src/sink/index.js';
import type { Sink } from '../../src/sink/types.js';
import { encodeCheckpoint } from '../../src/source/position.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { insert, transaction } from '../../src/testing/mapper-kit.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { defineProjection, recordedInput, toProjectionEvent, type ProjectionDefinition, type ProjectionEvent, type ProjectionStatus } from '../../src/consumer/index.js';

export const SYSTEM_ID = '7400000000000000001';

/** One ledger row: a deposit (or a closing) of an account; `stream` overrides the account's stream (a delayed copy elsewhere). */
export interface LedgerEntry {
  readonly account: string;
  readonly kind: 'deposit' | 'close';
  readonly amount?: number;
  readonly stream?: string;
}

/** Deposits → `Deposited` on `account-<id>`; closings → `AccountClosed`; entity `account/<id>` always. */
const ledger = defineMapper({
  name: 'ledger',
  tables: { 'public.ledger': { columns: ['id', 'account', 'kind', 'amount', 'stream'] } },
  map: (tx) =>
    tx.inserts('public.ledger').map(({ after: row }) => ({
      stream: (row['stream'] as string | null) ?? `account-${String(row['account'])}`,
      entity: { type: 'account', id: String(row['account']) },
      type: row['kind'] === 'close' ? 'AccountClosed' : 'Deposited',
      version: 1,
      data: row['kind'] === 'close' ? { account: row['account'] } : { account: row['account'], amount: row['amount'] },
    })),
});

export type LedgerEvents = { Deposited: { account: string; amount: number }; AccountClosed: { account: string } };

/** The accounts projection: balances kept by increments (`balance = balance + x`), closing deletes. */
export function accountsProjection(overrides: Partial<ProjectionDefinition<LedgerEvents>> = {}) {
  return defineProjection<LedgerEvents>({
    name: 'accounts',
    from: { categories: ['account', 'late'] },
    deletes: ['AccountClosed'],
    batchSize: 10,
    setup: async (client, schema) => {
      await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".accounts (id text PRIMARY KEY, balance bigint NOT NULL)`);
    },
    handlers: {
      Deposited: async (event, ctx) => {
        await ctx.client.query(`INSERT INTO "${ctx.schema}".accounts (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + EXCLUDED.balance`, [
          event.data.account,
          event.data.amount,
        ]);
      },
      AccountClosed: async (event, ctx) => {
        await ctx.client.query(`DELETE FROM "${ctx.schema}".accounts WHERE id = $1`, [event.data.account]);
      },
    },
    ...overrides,
  });
}

export interface ConsumerRig {
  readonly db: TestDatabase;
  readonly kdb: InMemoryKurrentDB;
  readonly pool: pg.Pool;
  /** Maps and appends one source transaction of ledger rows at `commitLsn`. Returns how many events it made. */
  write(commitLsn: string, xid: number, entries: readonly LedgerEntry[]): Promise<number>;
  /** Every event of `$all` the projection's categories select, as handlers receive them (before contracts). */
  readAll(): Promise<ProjectionEvent[]>;
  balances(schema?: string): Promise<Record<string, number>>;
  sql<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

/** Waits until `check` stops throwing (deadline, never a fixed sleep). */
export async function until(check: () => void | Promise<void>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** Events a runner has dealt with (applied, skipped, unhandled or parked). */
export function processed(status: ProjectionStatus): number {
  return status.applied + status.unhandled + status.parked + status.skipped.position + status.skipped.receipt + status.skipped.entityVersion;
}

let rowId = 0;

export async function createConsumerRig(name: string): Promise<ConsumerRig> {
  const db = await createTestDatabase(inject('postgres'), `cs_${name}`);
  const kdb = await startInMemoryKurrentDB();
  const sink: Sink = await createKurrentDBSink({ connectionString: kdb.connectionString, assembler: 'ledger-asm', checkpointStream: false });
  const pool = new pg.Pool({ connectionString: db.connectionString, max: 4 });
  const reader = KurrentDBClient.connectionString(kdb.connectionString);
  const context = { assembler: 'ledger-asm', sourceIdentity: SYSTEM_ID };

  return {
    db,
    kdb,
    pool,
    async write(commitLsn, xid, entries) {
      const changes = entries.map((e) => insert('public.ledger', { id: ++rowId, account: e.account, kind: e.kind, amount: e.amount ?? 0, stream: e.stream ?? null }));
      const base = transaction(changes, { commitLsn, xid, systemId: SYSTEM_ID });
      const checkpoint = encodeCheckpoint({ systemId: SYSTEM_ID, timeline: 1, slot: 'ledger', commitLsn, xid });
      const unit = { ...base, position: { ...base.position, checkpoint } };
      const { events } = mapUnit([ledger], unit, context);
      await sink.append({ position: { checkpoint, commitLsn, xid, systemId: SYSTEM_ID }, events });
      return events.length;
    },
    async readAll() {
      const out: ProjectionEvent[] = [];
      for await (const resolved of reader.readAll({ fromPosition: START, direction: FORWARDS })) {
        const input = recordedInput(resolved);
        if (input && (input.stream.startsWith('account-') || input.stream.startsWith('late-'))) out.push(toProjectionEvent(input));
      }
      return out;
    },
    async balances(schema = 'public') {
      const rows = await pool.query<{ id: string; balance: string }>(`SELECT id, balance::text FROM "${schema}".accounts ORDER BY id`);
      return Object.fromEntries(rows.rows.map((r) => [r.id, Number(r.balance)]));
    },
    async sql(text, params) {
      return (await pool.query(text, params)).rows;
    },
    async close() {
      await reader.dispose().catch(() => undefined);
      await sink.close();
      await kdb.close();
      await pool.end();
      await db.drop();
    },
  };
}
