// Acknowledgements against PostgreSQL 17: the slot's confirmed_flush_lsn follows the
// durable position only; unacknowledged transactions come back after a restart, acknowledged
// ones never do; an idle (filtered) slot does not pin WAL.
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createPostgresSource, type PostgresSource, type PostgresSourceOptions } from '../../src/source/index.js';
import { compareLsn, lsnDistance } from '../../src/source/position.js';
import { setupCapture } from '../../src/source/setup.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { collectTransactions, insertedIds } from '../support/collect-transactions.js';
import { dropRole } from '../support/roles.js';

const ids = insertedIds;

describe('capture acknowledgements (PostgreSQL 17, least-privilege role)', () => {
  let db: TestDatabase;
  let role: string;
  const sources: PostgresSource[] = [];

  async function prepare(name: string, tables: string[]) {
    const slot = `${name}_${role}`.slice(0, 63);
    await setupCapture({ connection: db.connectionConfig(), publication: `pub_${name}`, slot, tables });
    return slot;
  }

  function open(name: string, slot: string, tables: string[], extra: Partial<PostgresSourceOptions> = {}): PostgresSource {
    const source = createPostgresSource({ connection: db.connectionConfig({ user: role }), slot, publication: `pub_${name}`, tables, statusIntervalMs: 200, feedbackDelayMs: 0, ...extra });
    sources.push(source);
    return source;
  }

  async function slotRow(slot: string) {
    const [row] = await db.query<{ confirmed_flush_lsn: string; restart_lsn: string; retained: string; current: string }>(
      `SELECT confirmed_flush_lsn::text, restart_lsn::text, (pg_current_wal_lsn() - restart_lsn)::text AS retained, pg_current_wal_lsn()::text AS current
         FROM pg_replication_slots WHERE slot_name = $1`,
      [slot],
    );
    if (!row) throw new Error(`slot ${slot} is gone`);
    return row;
  }

  /** Waits until the walsender has processed `n` more standby status updates (reply_time moved n times). */
  async function statusUpdates(slot: string, n: number): Promise<void> {
    const seen = new Set<string>();
    await vi.waitFor(
      async () => {
        const [row] = await db.query<{ reply_time: string | null }>(
          `SELECT r.reply_time::text FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`,
          [slot],
        );
        if (row?.reply_time) seen.add(row.reply_time);
        if (seen.size < n + 1) throw new Error(`seen ${seen.size} status updates`);
      },
      { timeout: 15_000, interval: 50 },
    );
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'capture_acks');
    role = `cap_${db.database}`.slice(0, 63);
    await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
    await db.query(`
      CREATE TABLE public.item (id int PRIMARY KEY, note text);
      CREATE TABLE public.flow (id int PRIMARY KEY, note text);
      CREATE TABLE public.quiet (id int PRIMARY KEY);
      CREATE TABLE public.noisy (id bigserial PRIMARY KEY, payload text);`);
    await db.query(`GRANT SELECT ON public.item, public.flow, public.quiet TO ${role}`);
  });

  afterAll(async () => {
    for (const s of sources) await s.close();
    await db?.drop();
    await dropRole(role);
  });

  it('re-delivers every unacknowledged transaction after a restart, and nothing acknowledged', async () => {
    const slot = await prepare('restart', ['public.item']);
    const first = open('restart', slot, ['public.item']);
    const one = collectTransactions(first);
    for (let i = 1; i <= 5; i++) await db.query(`INSERT INTO public.item VALUES ($1, 'n')`, [i]);
    const received = await one.until(5);
    expect(ids(received)).toEqual([1, 2, 3, 4, 5]);
    first.acknowledge(received[1]!.tx); // 1 and 2 are durable downstream; 3..5 are not
    await first.close();
    await one.done;
    expect((await slotRow(slot)).confirmed_flush_lsn).toBe(received[1]!.tx.endLsn);

    const second = open('restart', slot, ['public.item']);
    const two = collectTransactions(second);
    await db.query(`INSERT INTO public.item VALUES (6, 'n')`);
    const again = await two.until(4);
    expect(ids(again)).toEqual([3, 4, 5, 6]);
    // The same transactions, not look-alikes: identical positions.
    expect(again.slice(0, 3).map((r) => r.tx.position.checkpoint)).toEqual(received.slice(2).map((r) => r.tx.position.checkpoint));
    await second.close();
  });

  it('never lets confirmed_flush_lsn pass the durable position while transactions are in flight', async () => {
    const slot = await prepare('durable', ['public.flow']);
    const source = open('durable', slot, ['public.flow']);
    const c = collectTransactions(source);
    await source.start();
    for (let i = 1; i <= 3; i++) await db.query(`INSERT INTO public.flow VALUES ($1, 'n')`, [i]);
    const received = await c.until(3);
    const firstEnd = received[0]!.tx.endLsn;
    // Several status updates and keepalives go by while all three are in flight.
    await statusUpdates(slot, 3);
    let row = await slotRow(slot);
    expect(compareLsn(row.confirmed_flush_lsn, source.status().durableLsn)).toBeLessThanOrEqual(0);
    expect(compareLsn(row.confirmed_flush_lsn, received[0]!.tx.commitLsn)).toBeLessThan(0);
    expect(source.status().inFlightTransactions).toBe(3);

    source.acknowledge(received[0]!.tx);
    await vi.waitFor(async () => expect((await slotRow(slot)).confirmed_flush_lsn).toBe(firstEnd), { timeout: 10_000, interval: 50 });
    await statusUpdates(slot, 3);
    row = await slotRow(slot);
    expect(row.confirmed_flush_lsn).toBe(firstEnd);
    expect(compareLsn(row.confirmed_flush_lsn, received[1]!.tx.commitLsn)).toBeLessThan(0);

    source.acknowledge(received[2]!.tx.endLsn); // cumulative: 2 and 3
    await vi.waitFor(async () => expect(compareLsn((await slotRow(slot)).confirmed_flush_lsn, received[2]!.tx.endLsn)).toBeGreaterThanOrEqual(0), {
      timeout: 10_000,
      interval: 50,
    });
    expect(source.status().inFlightTransactions).toBe(0);
    expect(() => source.acknowledge('FF/0')).toThrow(RangeError);
    await source.close();
  });

  it('keeps an idle slot moving while unpublished tables churn, so retained WAL stays bounded', async () => {
    const slot = await prepare('idle', ['public.quiet']);
    const source = open('idle', slot, ['public.quiet']);
    const c = collectTransactions(source);
    await source.start();
    const before = await slotRow(slot);
    // ~30 MB of WAL in tables the publication does not contain.
    for (let i = 0; i < 6; i++) await db.query(`INSERT INTO public.noisy (payload) SELECT repeat(md5(g::text), 4) FROM generate_series(1, 25000) g`);
    const churnEnd = (await slotRow(slot)).current;
    expect(lsnDistance(before.current, churnEnd)).toBeGreaterThan(20 * 1024 * 1024);
    // Nothing was in flight, so keepalive positions are acknowledged: confirmed_flush follows the WAL.
    await vi.waitFor(async () => expect(compareLsn((await slotRow(slot)).confirmed_flush_lsn, churnEnd)).toBeGreaterThanOrEqual(0), { timeout: 20_000, interval: 100 });
    // restart_lsn moves at the next running-xacts record (a checkpoint writes one).
    await db.query('CHECKPOINT');
    await vi.waitFor(
      async () => {
        const row = await slotRow(slot);
        expect(Number(row.retained)).toBeLessThan(4 * 1024 * 1024);
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(c.received).toHaveLength(0);
    expect(source.status().inFlightTransactions).toBe(0);
    await source.close();
  });
});
