// Several runners: two instances of one partition at once (the compare-and-set lets one apply,
// the other stops with ProjectionConflictError), and partitions 0/2 + 1/2 equal one runner.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProjectionRunner, ProjectionConflictError, storeTables, type ProjectionRunner } from '../../src/consumer/index.js';
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
  it('each event is applied exactly once; the loser stops with ProjectionConflictError', async () => {
    // The first batch to run holds the checkpoint row's lock; its first handler call waits until
    // the other instance is blocked on that lock, so both really start from the same checkpoint.
    let gate: Promise<void> | null = null;
    const waitForOtherInstance = () =>
      until(async () => {
        const [row] = await rig.sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%projection_checkpoints%FOR UPDATE'`);
        expect(row!.n).toBeGreaterThanOrEqual(1);
      });
    const base = accountsProjection();
    const projection = accountsProjection({
      handlers: {
        ...base.handlers,
        Deposited: async (event, ctx) => {
          await (gate ??= waitForOtherInstance());
          await base.handlers.Deposited!(event, ctx);
        },
      },
    });
    const runners: ProjectionRunner[] = [0, 1].map(() => createProjectionRunner({ projection, postgres: rig.db.connectionString, kurrentdb: rig.kdb.connectionString }));
    const outcomes = runners.map((r) => r.run().then(() => null, (error: unknown) => error));
    try {
      await until(() => expect(runners.some((r) => r.status().applied === total)).toBe(true));
    } finally {
      await Promise.all(runners.map((r) => r.stop()));
    }
    const errors = await Promise.all(outcomes);
    const losers = errors.filter((e) => e !== null);
    expect(losers).toHaveLength(1);
    expect(losers[0]).toBeInstanceOf(ProjectionConflictError);
    expect((losers[0] as ProjectionConflictError).details).toMatchObject({ projection: 'accounts', partition: '0/1', expected: null });
    expect(runners.map((r) => r.status().state).sort()).toEqual(['failed', 'stopped']);
    expect(runners.map((r) => r.status().applied).sort((a, b) => a - b)).toEqual([0, total]);
    expect(await rig.balances()).toEqual(expected);
    const [receipts] = await rig.sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${storeTables().receipts} WHERE projection = 'accounts'`);
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
