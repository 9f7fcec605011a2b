// The transaction-atomic mode: a source transaction's events — across streams, however many,
// interleaved with other transactions' in $all — commit in one PostgreSQL transaction; a unit
// still arriving is held; a failing handler does not split a transaction.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKWARDS, END, jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { applyBatch, createProjectionRunner, ProjectionHandlerError, storeTables, type ProjectionHandler } from '../../src/consumer/index.js';
import { accountsProjection, createConsumerRig, processed, until, type ConsumerRig, type LedgerEvents } from './consumer-rig.js';

let rig: ConsumerRig;
let client: KurrentDBClient;

beforeAll(async () => {
  rig = await createConsumerRig('atomic');
  client = KurrentDBClient.connectionString(rig.kdb.connectionString);
});
afterAll(async () => {
  await client?.dispose();
  await rig?.close();
});

/** The accounts projection in `schema`, atomic, recording for each applied event its unit and the PostgreSQL transaction it committed in. */
function atomicAccounts(name: string, schema: string, deposited?: ProjectionHandler<'Deposited', LedgerEvents['Deposited']>, categories = ['account', 'late']) {
  const base = accountsProjection();
  return accountsProjection({
    name,
    from: { categories },
    atomic: 'transaction',
    batchSize: 3,
    setup: async (c, s) => {
      await base.setup!(c, s);
      await c.query(`CREATE TABLE IF NOT EXISTS "${s}".seen (event_id text PRIMARY KEY, unit text, tx bigint NOT NULL)`);
    },
    handlers: {
      ...base.handlers,
      Deposited: async (event, ctx) => {
        await (deposited ?? base.handlers.Deposited!)(event, ctx);
        await ctx.client.query(`INSERT INTO "${ctx.schema}".seen VALUES ($1, $2, txid_current())`, [event.id, event.transaction?.correlationId ?? null]);
      },
    },
  });
}

async function runUntil(runner: ReturnType<typeof createProjectionRunner>, done: () => void | Promise<void>) {
  const running = runner.run();
  try {
    await until(done);
  } finally {
    await runner.stop();
  }
  await running;
}

/** PostgreSQL transactions per unit, from the `seen` table. */
async function transactionsPerUnit(schema: string): Promise<Map<string, { events: number; txs: number }>> {
  const rows = await rig.sql<{ unit: string; events: string; txs: string }>(`SELECT unit, count(*) AS events, count(DISTINCT tx) AS txs FROM "${schema}".seen GROUP BY unit`);
  return new Map(rows.map((r) => [r.unit, { events: Number(r.events), txs: Number(r.txs) }]));
}

/** Appends one event the way the assembler's metadata describes a unit's event, to a stream of its own. */
async function appendUnitEvent(stream: string, unit: string, index: number, count: number, amount: number): Promise<void> {
  const account = stream.slice(stream.indexOf('-') + 1);
  const metadata = { $correlationId: unit, 'transaction.index': String(index), 'transaction.count': String(count), 'entity.type': 'account', 'entity.id': account };
  await client.appendToStream(stream, jsonEvent({ type: 'Deposited', data: { account, amount }, metadata }));
}

describe("atomic: 'transaction'", () => {
  it('commits each source transaction whole — across streams, larger than batchSize, next to streams it does not select — while readers never see a transfer half-applied', async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS whole');
    // Transfers: +x on one account, -x on others, so every complete transaction sums to 0; some also write audit streams the projection does not read.
    for (let t = 0; t < 40; t++) {
      const width = 1 + (t % 7); // 1 … 7 accounts debited: up to 8 events, batchSize is 3
      const entries = [{ account: `w${t % 11}`, kind: 'deposit' as const, amount: 10 * width }];
      for (let i = 0; i < width; i++) entries.push({ account: `w${(t + i + 1) % 11}`, kind: 'deposit' as const, amount: -10 });
      if (t % 3 === 0) entries.push({ account: `w${t % 11}`, kind: 'deposit' as const, amount: 999, stream: `audit-${t}` } as never);
      await rig.write(`0/${(0x10000 + t * 0x100).toString(16).toUpperCase()}`, 7000 + t, entries);
    }
    const big = Array.from({ length: 60 }, (_, i) => ({ account: `w${i % 11}`, kind: 'deposit' as const, amount: i % 2 === 0 ? 5 : -5 }));
    await rig.write('0/30000', 7100, big);
    const selected = (await rig.readAll()).filter((e) => e.stream.startsWith('account-w'));
    const unitsExpected = new Map<string, number>();
    for (const e of selected) unitsExpected.set(e.transaction!.correlationId!, (unitsExpected.get(e.transaction!.correlationId!) ?? 0) + 1);

    const runner = createProjectionRunner({ projection: atomicAccounts('atomic_whole', 'whole'), postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'whole' });
    let reads = 0;
    let partial = 0;
    let reading = true;
    const reader = (async () => {
      while (reading) {
        const [row] = await rig.sql<{ total: string | null }>('SELECT sum(balance)::text AS total FROM whole.accounts').catch(() => [{ total: null }]);
        reads++;
        if (row?.total !== null && row?.total !== undefined && Number(row.total) !== 0) partial++;
      }
    })();
    try {
      await runUntil(runner, () => expect(runner.status().applied).toBe(selected.length));
    } finally {
      reading = false;
      await reader;
    }
    const perUnit = await transactionsPerUnit('whole');
    expect(perUnit.size).toBe(unitsExpected.size);
    for (const [unit, events] of unitsExpected) expect(perUnit.get(unit), unit).toEqual({ events, txs: 1 });
    expect(Object.values(await rig.balances('whole')).reduce((a, b) => a + b, 0)).toBe(0);
    expect(reads).toBeGreaterThan(0);
    expect(partial).toBe(0);
    // The 60-event transaction went whole although batchSize is 3;.
    expect(perUnit.get(selected.find((e) => e.source.origin === 'change' && e.source.commitLsn === '0/30000')!.transaction!.correlationId!)).toEqual({ events: 60, txs: 1 });
  });

  it('transactions interleaved in $all go together; a transaction still arriving is held until its last event', async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS interleaved');
    const projection = atomicAccounts('atomic_interleaved', 'interleaved', undefined, ['inter']);
    const runner = createProjectionRunner({ projection, postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'interleaved' });
    const running = runner.run();
    try {
      // Everything before (the other tests' transactions, none of them selected) is read and moved past.
      await until(() => expect(runner.status()).toMatchObject({ caughtUp: true, queued: 0, openTransactions: 0 }));
      expect(processed(runner.status())).toBe(0);
      // Two concurrent appends' events, interleaved: A0 B0 A1 B1 — then A2 much later.
      await appendUnitEvent('inter-ia0', 'A', 0, 3, 1);
      await appendUnitEvent('inter-ib0', 'B', 0, 2, 10);
      await appendUnitEvent('inter-ia1', 'A', 1, 3, 1);
      await appendUnitEvent('inter-ib1', 'B', 1, 2, 10);
      // All four received; B is complete, but no cut is clean before A is: nothing applied.
      await until(() => expect(runner.status()).toMatchObject({ queued: 4, openTransactions: 1 }));
      expect(processed(runner.status())).toBe(0);
      expect(await rig.sql('SELECT * FROM interleaved.seen')).toEqual([]);
      await appendUnitEvent('inter-ia2', 'A', 2, 3, 1);
      await until(() => expect(processed(runner.status())).toBe(5));
    } finally {
      await runner.stop();
    }
    await running;
    const perUnit = await transactionsPerUnit('interleaved');
    expect(perUnit.get('A')).toEqual({ events: 3, txs: 1 });
    expect(perUnit.get('B')).toEqual({ events: 2, txs: 1 });
    const [tx] = await rig.sql<{ n: string }>('SELECT count(DISTINCT tx) AS n FROM interleaved.seen');
    expect(Number(tx!.n)).toBe(1); // A and B in one PostgreSQL transaction: they could not be cut apart
  });

  it('a transaction that stays incomplete is named in a warning while the batch waits for it', async () => {
    const projection = atomicAccounts('atomic_waiting', 'unused', undefined, ['wait']);
    const warnings: Record<string, unknown>[] = [];
    const logger = { info() {}, error() {}, warn: (message: string, fields?: Record<string, unknown>) => void warnings.push({ message, ...fields }) };
    const { openEventFeed } = await import('../../src/consumer/event-feed.js');
    const last = await client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 }).next();
    const feed = openEventFeed(client, projection, last.value.event.position, { logger, warnAfterMs: 50 }); // after the last event of $all
    try {
      await appendUnitEvent('wait-z0', 'Z', 0, 2, 1);
      const next = feed.next(10);
      await until(() => expect(warnings).toContainEqual(expect.objectContaining({ message: 'projection waits for the rest of a source transaction', transaction: 'Z', seen: 1, count: 2 })));
      await appendUnitEvent('wait-z1', 'Z', 1, 2, 1);
      expect((await next)!.events.map((e) => e.stream)).toEqual(['wait-z0', 'wait-z1']);
    } finally {
      await feed.close();
    }
  });

  it('starting from a checkpoint that a batched run left inside a transaction: the rest of it is applied, nothing waits forever', async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS switched');
    const lsn = '0/40000';
    await rig.write(lsn, 7200, [1, 2, 3, 4].map((n) => ({ account: `s${n}`, kind: 'deposit' as const, amount: n })));
    const unit = (await rig.readAll()).filter((e) => e.source.origin === 'change' && e.source.commitLsn === lsn);
    expect(unit).toHaveLength(4);
    // The batched mode applied the first two events of the transaction and stopped there.
    const batched = atomicAccounts('atomic_switched', 'switched');
    const client = await rig.pool.connect();
    try {
      await client.query('BEGIN');
      await batched.setup!(client, 'switched');
      await client.query('COMMIT');
      const { ensureStore, ensureCheckpoint } = await import('../../src/consumer/store.js');
      await ensureStore(client, storeTables());
      await ensureCheckpoint(client, storeTables(), 'atomic_switched', '0/1');
      // The checkpoint at the transaction's second event (handled by nothing here: s1 and s2 stay absent).
      const target = { projection: { ...batched, atomic: 'batch' as const, handlers: {} }, tables: storeTables(), schema: 'switched' };
      await applyBatch(client, target, 'current', unit.slice(0, 2));
    } finally {
      client.release();
    }
    const runner = createProjectionRunner({ projection: batched, postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'switched' });
    await runUntil(runner, async () => expect(await rig.balances('switched')).toMatchObject({ s3: 3, s4: 4 }));
    expect(await rig.balances('switched')).toEqual({ s3: 3, s4: 4 }); // the first two were applied by the batched run (here: with no handler)
  });
});

describe("atomic: 'transaction' with a failing handler", () => {
  const POISON = 13;
  async function writePoisoned(lsn: string, xid: number, prefix: string) {
    return rig.write(lsn, xid, [
      { account: `${prefix}1`, kind: 'deposit', amount: 100 },
      { account: `${prefix}2`, kind: 'deposit', amount: POISON },
      { account: `${prefix}3`, kind: 'deposit', amount: 300 },
    ]);
  }
  const failing = (failures: { count: number }): ProjectionHandler<'Deposited', LedgerEvents['Deposited']> => async (event, ctx) => {
    await accountsProjection().handlers.Deposited!(event, ctx);
    if (event.data.amount === POISON) {
      failures.count++;
      throw new Error(`cannot take ${POISON}`);
    }
  };

  it("onError 'park': the transaction is tried again whole, then applied without the event, which is parked in the same PostgreSQL transaction", async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS apark');
    await writePoisoned('0/50000', 7300, 'pk');
    const failures = { count: 0 };
    const projection = { ...atomicAccounts('atomic_park', 'apark', failing(failures)), onError: 'park' as const, retry: { attempts: 2, initialDelayMs: 1, maxDelayMs: 5 } };
    const runner = createProjectionRunner({ projection, postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'apark' });
    await runUntil(runner, () => expect(runner.status().parked).toBe(1));
    expect(failures.count).toBe(3); // once, then twice again
    const balances = await rig.balances('apark');
    expect(balances).toMatchObject({ pk1: 100, pk3: 300 });
    expect(balances['pk2']).toBeUndefined();
    const unit = (await rig.readAll()).find((e) => e.source.origin === 'change' && e.source.commitLsn === '0/50000')!.transaction!.correlationId;
    const [row] = await rig.sql<{ txs: string; events: string }>('SELECT count(DISTINCT tx) AS txs, count(*) AS events FROM apark.seen WHERE unit = $1', [unit]);
    expect(row).toEqual({ txs: '1', events: '2' }); // the transaction's two other events, together
    const parked = await rig.sql<{ type: string; attempts: number }>(`SELECT type, attempts FROM ${storeTables().failedEvents} WHERE projection = 'atomic_park'`);
    expect(parked).toEqual([{ type: 'Deposited', attempts: 3 }]);
  });

  it("onError 'halt': nothing of the transaction is applied, the checkpoint stays before it", async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS ahalt');
    const failures = { count: 0 };
    const projection = { ...atomicAccounts('atomic_halt', 'ahalt', failing(failures)), retry: { attempts: 1, initialDelayMs: 1, maxDelayMs: 5 } };
    const runner = createProjectionRunner({ projection, postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'ahalt' });
    await expect(runner.run()).rejects.toBeInstanceOf(ProjectionHandlerError);
    expect(failures.count).toBe(2);
    const balances = await rig.balances('ahalt');
    expect(balances['pk1']).toBeUndefined(); // applied only with its transaction
    expect(balances['pk3']).toBeUndefined();
    const poisonUnit = (await rig.readAll()).filter((e) => e.source.origin === 'change' && e.source.commitLsn === '0/50000');
    const position = runner.status().position;
    expect(position === null || position.commit < poisonUnit[0]!.position.commit).toBe(true);
  });
});
