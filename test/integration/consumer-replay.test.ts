// Replays leave a projection as one delivery did — with non-idempotent effects (balances kept by
// increments): a second runner from position 0 (receipts), the same batch re-applied (checkpoint),
// a replay after receipts were pruned (entity versions); and a delete followed by a delayed older
// update stays deleted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyBatch, createProjectionRunner, pruneReceipts, storeTables } from '../../src/consumer/index.js';
import { accountsProjection, createConsumerRig, processed, until, type ConsumerRig } from './consumer-rig.js';

let rig: ConsumerRig;

beforeAll(async () => {
  rig = await createConsumerRig('replay');
});
afterAll(async () => {
  await rig?.close();
});

/** Runs a runner until it has dealt with `events` events, stops it, returns its status. */
async function runThrough(events: number, projection = accountsProjection()) {
  const runner = createProjectionRunner({ projection, postgres: rig.pool, kurrentdb: rig.kdb.connectionString });
  const done = runner.run();
  try {
    await until(() => expect(processed(runner.status())).toBeGreaterThanOrEqual(events));
  } finally {
    await runner.stop();
  }
  await done;
  return runner.status();
}

async function deleteCheckpoint(): Promise<void> {
  await rig.sql(`DELETE FROM ${storeTables().checkpoints} WHERE projection = 'accounts'`);
}

describe('replays of a projection with increments', () => {
  let total = 0;
  let once: Record<string, number> = {};
  const expected: Record<string, number> = {};

  it('one delivery applies each event once', async () => {
    for (let i = 0; i < 24; i++) {
      const account = `a${i % 4}`;
      const amount = i + 1;
      // Several events per transaction: two deposits of one account (ordinals 0 and 1).
      total += await rig.write(`0/${(0x1000 + i * 0x100).toString(16).toUpperCase()}`, 2000 + i, [
        { account, kind: 'deposit', amount },
        { account, kind: 'deposit', amount: 100 },
      ]);
      expected[account] = (expected[account] ?? 0) + amount + 100;
    }
    const status = await runThrough(total);
    expect(status.applied).toBe(total);
    once = await rig.balances();
    expect(once).toEqual(expected);
  });

  it('a second runner from position 0 (checkpoint row deleted) applies nothing again: receipts', async () => {
    await deleteCheckpoint();
    const status = await runThrough(total);
    expect(status).toMatchObject({ applied: 0, skipped: { position: 0, receipt: total, entityVersion: 0 } });
    expect(await rig.balances()).toEqual(once);
  });

  it('the same events re-applied as a batch are recognised by the checkpoint', async () => {
    const events = await rig.readAll();
    expect(events).toHaveLength(total);
    const client = await rig.pool.connect();
    try {
      const outcome = await applyBatch(client, { projection: accountsProjection(), tables: storeTables(), schema: 'public' }, 'current', events);
      expect(outcome).toMatchObject({ applied: 0, skipped: { position: total, receipt: 0, entityVersion: 0 } });
    } finally {
      client.release();
    }
    expect(await rig.balances()).toEqual(once);
  });

  it('a replay from position 0 after the receipts expired is recognised by entity versions', async () => {
    const pruned = await pruneReceipts({ postgres: rig.pool, projection: 'accounts', appliedBefore: new Date(Date.now() + 60_000) });
    expect(pruned).toBe(total);
    await deleteCheckpoint();
    const status = await runThrough(total);
    expect(status).toMatchObject({ applied: 0, skipped: { position: 0, receipt: 0, entityVersion: total } });
    expect(await rig.balances()).toEqual(once);
  });

  it('new events after the replays are applied once', async () => {
    total += await rig.write('0/9000', 3000, [{ account: 'a0', kind: 'deposit', amount: 7 }]);
    const status = await runThrough(1);
    expect(status.applied).toBe(1);
    expect(await rig.balances()).toEqual({ ...once, a0: once['a0']! + 7 });
  });
});

describe('deletes and order', () => {
  it('a delete followed by a delayed older update: the entity stays deleted', async () => {
    // z1: deposit at 0/20000, closed at 0/30000; a deposit of 0/25000 (older than the closing)
    // arrives after the tombstone, in another stream of the same entity.
    const before = await rig.readAll();
    let events = await rig.write('0/20000', 5000, [{ account: 'z1', kind: 'deposit', amount: 5 }]);
    events += await rig.write('0/30000', 5002, [{ account: 'z1', kind: 'close' }]);
    events += await rig.write('0/25000', 5001, [{ account: 'z1', kind: 'deposit', amount: 9, stream: 'late-z1' }]);
    const status = await runThrough(events);
    expect(status).toMatchObject({ applied: 2, skipped: { entityVersion: 1 } });
    expect((await rig.balances())['z1']).toBeUndefined();
    const [tombstone] = await rig.sql<{ deleted: boolean; source_lsn: string }>(
      `SELECT deleted, source_lsn::text FROM ${storeTables().entityVersions} WHERE projection = 'accounts' AND entity_type = 'account' AND entity_id = 'z1'`,
    );
    expect(tombstone).toEqual({ deleted: true, source_lsn: '0/30000' });

    // The same older event applied directly through the batch function (position guard off: a
    // fresh checkpoint and no receipt for it) is still refused by the tombstone.
    const late = (await rig.readAll()).slice(before.length).find((e) => e.stream === 'late-z1')!;
    await rig.sql(`DELETE FROM ${storeTables().receipts} WHERE event_id = $1`, [late.id]);
    await deleteCheckpoint();
    const client = await rig.pool.connect();
    try {
      const outcome = await applyBatch(client, { projection: accountsProjection(), tables: storeTables(), schema: 'public' }, 'current', [late]);
      expect(outcome).toMatchObject({ applied: 0, skipped: { position: 0, receipt: 0, entityVersion: 1 } });
    } finally {
      client.release();
    }
    expect((await rig.balances())['z1']).toBeUndefined();
  });
});
