// Poison events: a throwing handler is retried (its failed attempts leave no effect), then parked
// with the diagnosis (onError park) or the runner halts before it (halt). Nothing is skipped silently.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProjectionRunner, ProjectionHandlerError, storeTables } from '../../src/consumer/index.js';
import { accountsProjection, createConsumerRig, processed, until, type ConsumerRig, type LedgerEvents } from './consumer-rig.js';
import type { ProjectionHandler } from '../../src/consumer/index.js';

let rig: ConsumerRig;
let total = 0;
const expected: Record<string, number> = {};
const POISON = 13;

beforeAll(async () => {
  rig = await createConsumerRig('poison');
  for (let i = 0; i < 30; i++) {
    const account = `p${i % 3}`;
    const amount = i === 17 ? POISON : i + 100;
    total += await rig.write(`0/${(0x1000 + i * 0x100).toString(16).toUpperCase()}`, 6000 + i, [{ account, kind: 'deposit', amount }]);
    if (amount !== POISON) expected[account] = (expected[account] ?? 0) + amount;
  }
});
afterAll(async () => {
  await rig?.close();
});

/** A Deposited handler that adds first (an effect the rollback must undo) and then throws on the poison amount. */
function poisoned(name: string, onError: 'park' | 'halt', failures: { count: number }) {
  const base = accountsProjection();
  const deposited: ProjectionHandler<'Deposited', LedgerEvents['Deposited']> = async (event, ctx) => {
    await base.handlers.Deposited!(event, ctx);
    if (event.data.amount === POISON) {
      failures.count++;
      throw new Error(`cannot take ${POISON}`);
    }
  };
  return accountsProjection({ name, onError, retry: { attempts: 2, initialDelayMs: 1, maxDelayMs: 5 }, handlers: { ...base.handlers, Deposited: deposited } });
}

describe('a handler that keeps throwing', () => {
  it("onError 'park': retried, parked with the diagnosis, the rest applied once", async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS parking');
    const failures = { count: 0 };
    const runner = createProjectionRunner({ projection: poisoned('accounts_park', 'park', failures), postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'parking' });
    const done = runner.run();
    try {
      await until(() => expect(processed(runner.status())).toBe(total));
    } finally {
      await runner.stop();
    }
    await done;
    // Once in its batch, then twice alone.
    expect(failures.count).toBe(3);
    expect(runner.status()).toMatchObject({ applied: total - 1, parked: 1, state: 'stopped' });
    expect(await rig.balances('parking')).toEqual(expected);
    const parked = await rig.sql<{ type: string; error_message: string; attempts: number; data: unknown; stream: string }>(
      `SELECT type, error_message, attempts, data, stream FROM ${storeTables().failedEvents} WHERE projection = 'accounts_park'`,
    );
    expect(parked).toEqual([{ type: 'Deposited', error_message: `cannot take ${POISON}`, attempts: 3, data: { account: 'p2', amount: POISON }, stream: 'account-p2' }]);
    // The checkpoint went past the parked event, to the last one.
    const events = await rig.readAll();
    const [checkpoint] = await rig.sql<{ commit_position: string }>(`SELECT commit_position::text FROM ${storeTables().checkpoints} WHERE projection = 'accounts_park'`);
    expect(BigInt(checkpoint!.commit_position)).toBe(events.at(-1)!.position.commit);
  });

  it("onError 'halt': retried, then the runner halts before the event with its diagnosis", async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS halting');
    const failures = { count: 0 };
    const runner = createProjectionRunner({ projection: poisoned('accounts_halt', 'halt', failures), postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'halting' });
    const error = await runner.run().then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ProjectionHandlerError);
    expect((error as ProjectionHandlerError).details).toMatchObject({ projection: 'accounts_halt', type: 'Deposited', stream: 'account-p2', attempts: 3, cause: { message: `cannot take ${POISON}` } });
    expect(failures.count).toBe(3);
    expect(runner.status()).toMatchObject({ state: 'failed', applied: 17, parked: 0 });
    // The events before the poison one are applied; it and everything after are not; the
    // checkpoint is just before it, so a restart (after a fix) begins there.
    const events = await rig.readAll();
    const poison = events[17]!;
    expect(poison.data).toMatchObject({ amount: POISON });
    const [checkpoint] = await rig.sql<{ commit_position: string }>(`SELECT commit_position::text FROM ${storeTables().checkpoints} WHERE projection = 'accounts_halt'`);
    expect(BigInt(checkpoint!.commit_position)).toBe(events[16]!.position.commit);
    const before: Record<string, number> = {};
    for (const e of events.slice(0, 17)) {
      const { account, amount } = e.data as { account: string; amount: number };
      before[account] = (before[account] ?? 0) + amount;
    }
    expect(await rig.balances('halting')).toEqual(before);
    const [parked] = await rig.sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${storeTables().failedEvents} WHERE projection = 'accounts_halt'`);
    expect(parked!.n).toBe(0);
  });

  it('a handler that fails twice and then succeeds applies its effect once', async () => {
    await rig.sql('CREATE SCHEMA IF NOT EXISTS flaky');
    const base = accountsProjection();
    let calls = 0;
    const projection = accountsProjection({
      name: 'accounts_flaky',
      retry: { attempts: 3, initialDelayMs: 1, maxDelayMs: 5 },
      handlers: {
        ...base.handlers,
        Deposited: async (event, ctx) => {
          await base.handlers.Deposited!(event, ctx);
          if (event.data.amount === POISON && ++calls <= 2) throw new Error('transient');
        },
      },
    });
    const runner = createProjectionRunner({ projection, postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'flaky' });
    const done = runner.run();
    try {
      await until(() => expect(processed(runner.status())).toBe(total));
    } finally {
      await runner.stop();
    }
    await done;
    expect(calls).toBe(3);
    expect(runner.status()).toMatchObject({ applied: total, parked: 0 });
    const withPoison = { ...expected, p2: expected['p2']! + POISON };
    expect(await rig.balances('flaky')).toEqual(withPoison);
  });
});
