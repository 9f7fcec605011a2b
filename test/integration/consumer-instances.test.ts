// Several runners: two instances of one partition at once (the partition's lease lets one run;
// the other stops, or waits as a standby and takes over), writers without a lease (the
// compare-and-set lets one apply), and partitions 0/2 + 1/2 equal one runner.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { applyBatch, createProjectionRunner, ensureStore, ProjectionConflictError, ProjectionLeaseHeldError, storeTables } from '../../src/consumer/index.js';
import { ensureCheckpoint } from '../../src/consumer/store.js';
import { accountsProjection, createConsumerRig, processed, until, type ConsumerRig } from './consumer-rig.js';

let rig: ConsumerRig;
let total = 0;
const expected: Record<string, number> = {};

beforeAll(async () => {
  rig = await createConsumerRig('instances');
  for (let i = 0; i < 40; i++) {
    const account = `b${i % 7}`;
    total += await rig.write(`0/${(0x1000 + i * 0x100).toString(16).toUpperCase()}`, 4000 + i, [{ account, kind: 'deposit', amount: i + 1 }]);
    expected[account] = (expected[account] ?? 0) + i + 1;
  }
});
afterAll(async () => {
  await rig?.close();
});

describe('two instances of one projection partition at once', () => {
  it('the second stops at once with ProjectionLeaseHeldError naming the active one; each event is applied exactly once', async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS leased');
    const projection = accountsProjection({ name: 'accounts_leased' });
    const first = createProjectionRunner({ projection, postgres: rig.db.connectionString, kurrentdb: rig.kdb.connectionString, schema: 'leased' });
    const firstRun = first.run();
    try {
      await until(() => expect(first.status().state).toBe('running'));
      const second = createProjectionRunner({ projection, postgres: rig.db.connectionString, kurrentdb: rig.kdb.connectionString, schema: 'leased' });
      const error = await second.run().then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ProjectionLeaseHeldError);
      const holder = (error as ProjectionLeaseHeldError).details.holder;
      expect(holder?.pid).toEqual(expect.any(Number));
      expect((error as ProjectionLeaseHeldError).message).toContain(`backend ${holder!.pid}`);
      expect(second.status()).toMatchObject({ state: 'failed', applied: 0 });
      await until(() => expect(first.status().applied).toBe(total));
    } finally {
      await first.stop();
    }
    await firstRun;
    expect(await rig.balances('leased')).toEqual(expected);
  });

  it('writers that take no lease (applyBatch from the same checkpoint at once): the compare-and-set lets exactly one apply', async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS raced');
    // The first batch to run holds the checkpoint row's lock; its first handler call waits until
    // the other writer is blocked on that lock, so both really start from the same checkpoint.
    let gate: Promise<void> | null = null;
    const waitForOther = () =>
      until(async () => {
        const [row] = await rig.sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%projection_checkpoints%FOR UPDATE'`);
        expect(row!.n).toBeGreaterThanOrEqual(1);
      });
    const base = accountsProjection();
    const projection = accountsProjection({
      name: 'accounts_raced',
      handlers: {
        ...base.handlers,
        Deposited: async (event, ctx) => {
          await (gate ??= waitForOther());
          await base.handlers.Deposited!(event, ctx);
        },
      },
    });
    const events = await rig.readAll();
    const clients = [await rig.pool.connect(), await rig.pool.connect()];
    try {
      const target = { projection, tables: storeTables(), schema: 'raced' };
      await ensureStore(clients[0]!, target.tables);
      await clients[0]!.query('CREATE TABLE IF NOT EXISTS raced.accounts (id text PRIMARY KEY, balance bigint NOT NULL)');
      await ensureCheckpoint(clients[0]!, target.tables, 'accounts_raced', '0/1');
      const outcomes = await Promise.all(clients.map((c) => applyBatch(c, target, null, events).then(() => null, (e: unknown) => e)));
      const losers = outcomes.filter((e) => e !== null);
      expect(losers).toHaveLength(1);
      expect(losers[0]).toBeInstanceOf(ProjectionConflictError);
      expect((losers[0] as ProjectionConflictError).details).toMatchObject({ projection: 'accounts_raced', partition: '0/1', expected: null });
    } finally {
      for (const c of clients) c.release();
    }
    expect(await rig.balances('raced')).toEqual(expected);
    const [receipts] = await rig.sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${storeTables().receipts} WHERE projection = 'accounts_raced'`);
    expect(receipts!.n).toBe(total);
  });
});

describe('partitions', () => {
  it('partitions 0/2 and 1/2 together produce what one runner produces', async () => {
    for (const schema of ['single', 'parted']) await rig.sql(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    const single = createProjectionRunner({
      projection: accountsProjection({ name: 'accounts_single' }),
      postgres: rig.pool,
      kurrentdb: rig.kdb.connectionString,
      schema: 'single',
    });
    const parts = [0, 1].map((index) =>
      createProjectionRunner({
        projection: accountsProjection({ name: 'accounts_parted', partition: { count: 2, index } }),
        postgres: rig.pool,
        kurrentdb: rig.kdb.connectionString,
        schema: 'parted',
      }),
    );
    const all = [single, ...parts];
    const runs = all.map((r) => r.run());
    try {
      await until(() => {
        expect(processed(single.status())).toBe(total);
        expect(parts.reduce((n, r) => n + processed(r.status()), 0)).toBe(total);
      });
    } finally {
      await Promise.all(all.map((r) => r.stop()));
    }
    await Promise.all(runs);
    // Both partitions had streams to apply, each its own checkpoint row.
    expect(parts.map((r) => r.status().applied).every((n) => n > 0)).toBe(true);
    const rows = await rig.sql<{ partition: string }>(`SELECT partition FROM ${storeTables().checkpoints} WHERE projection = 'accounts_parted' ORDER BY partition`);
    expect(rows.map((r) => r.partition)).toEqual(['0/2', '1/2']);
    expect(await rig.balances('parted')).toEqual(await rig.balances('single'));
    expect(await rig.balances('single')).toEqual(expected);
  });
});

describe('a standby instance', () => {
  it('a standby waits, then takes over from the checkpoint when the active instance stops — and when its connection is killed — under a live workload, exactly once', async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS standby');
    const projection = accountsProjection({ name: 'accounts_standby' });
    const want = { ...expected };
    let events = total;
    let lsn = 0x90000;
    const more = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const account = `sb${i % 5}`;
        events += await rig.write(`0/${(lsn += 0x100).toString(16).toUpperCase()}`, 9000 + lsn, [{ account, kind: 'deposit', amount: 7 }]);
        want[account] = (want[account] ?? 0) + 7;
      }
    };
    // Three instances on one pool that never closes idle clients: a client returned to it must give its lease back.
    const pool = new pg.Pool({ connectionString: rig.db.connectionString, max: 4, idleTimeoutMillis: 0 });
    const runners = [0, 1, 2].map(() => createProjectionRunner({ projection, postgres: pool, kurrentdb: rig.kdb.connectionString, schema: 'standby', standby: true, standbyPollMs: 20 }));
    const runs = runners.map((r) => r.run().then(() => null, (e: unknown) => e));
    const active = () => runners.filter((r) => r.status().state === 'running');
    try {
      await until(() => expect(runners.map((r) => r.status().state).sort()).toEqual(['running', 'standby', 'standby']));
      await more(10);
      const first = active()[0]!;
      await until(() => expect(first.status().applied).toBe(events));
      // A graceful stop: the lease goes back with the pooled client; a standby takes over.
      await first.stop();
      await more(10);
      await until(() => expect(active()).toHaveLength(1));
      const second = active()[0]!;
      await until(() => expect(processed(second.status())).toBeGreaterThan(0));
      // A crash of the active one: its session killed; the lease goes with it.
      const pids = await rig.sql<{ pid: number }>(
        "SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
      );
      expect(pids).toHaveLength(1);
      await rig.sql('SELECT pg_terminate_backend($1)', [pids[0]!.pid]);
      await until(() => expect(second.status().state).toBe('failed'));
      await more(10);
      await until(() => expect(active()).toHaveLength(1));
      const third = active()[0]!;
      expect([first, second]).not.toContain(third);
      await until(async () => expect(await rig.balances('standby')).toEqual(want));
    } finally {
      await Promise.all(runners.map((r) => r.stop()));
    }
    const outcomes = await Promise.all(runs);
    await pool.end();
    expect(outcomes.filter((e) => e !== null)).toHaveLength(1); // the one whose connection was killed
    expect(await rig.balances('standby')).toEqual(want);
    const [receipts] = await rig.sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${storeTables().receipts} WHERE projection = 'accounts_standby'`);
    expect(receipts!.n).toBe(events);
  });
});
