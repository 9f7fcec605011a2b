// Connection loss and server restart: the reader reconnects with backoff, resumes from the
// durable position, and every unacknowledged transaction is delivered — none lost, none twice.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { CommittedTransaction } from '../../src/buffer/index.js';
import { createPostgresSource, type PostgresSource } from '../../src/source/index.js';
import { compareLsn } from '../../src/source/position.js';
import { setupCapture } from '../../src/source/setup.js';
import type { InsertChange } from '../../src/source/types.js';
import { createTestDatabase, startEmbeddedPostgres, type EmbeddedPostgres, type TestDatabase } from '../../src/testing/postgres.js';
import { collectTransactions, insertedIds } from '../support/collect-transactions.js';
import { dropRole } from '../support/roles.js';

const backoff = { initialMs: 50, maxMs: 1_000, multiplier: 2, jitter: 0.5 };

describe('capture reconnects (PostgreSQL 17)', () => {
  const sources: PostgresSource[] = [];

  afterAll(async () => {
    for (const s of sources) await s.close();
  });

  describe('after the walsender is terminated', () => {
    let db: TestDatabase;
    let role: string;

    beforeAll(async () => {
      db = await createTestDatabase(inject('postgres'), 'capture_reconnect');
      role = `cap_${db.database}`.slice(0, 63);
      await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
      await db.query(`CREATE TABLE public.item (id int PRIMARY KEY)`);
      await db.query(`GRANT SELECT ON public.item TO ${role}`);
    });

    afterAll(async () => {
      for (const s of sources.splice(0)) await s.close();
      await db?.drop();
      await dropRole(role);
    });

    it('reconnects and delivers every unacknowledged transaction exactly once', async () => {
      const slot = `term_${role}`.slice(0, 63);
      await setupCapture({ connection: db.connectionConfig(), publication: 'pub_term', slot, tables: ['public.item'] });
      const reconnects: Error[] = [];
      const source = createPostgresSource({
        connection: db.connectionConfig({ user: role }),
        slot,
        publication: 'pub_term',
        tables: ['public.item'],
        backoff,
        statusIntervalMs: 500,
        onReconnect: (error) => reconnects.push(error),
      });
      sources.push(source);
      const c = collectTransactions(source);
      for (let i = 1; i <= 3; i++) await db.query(`INSERT INTO public.item VALUES ($1)`, [i]);
      expect(insertedIds(await c.until(3))).toEqual([1, 2, 3]);
      source.acknowledge(c.received[0]!.tx);

      for (let round = 0; round < 2; round++) {
        const [killed] = await db.query<{ ok: boolean }>(`SELECT pg_terminate_backend(active_pid) AS ok FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, [slot]);
        expect(killed?.ok).toBe(true);
        // Written while (or right after) the reader is disconnected.
        await db.query(`INSERT INTO public.item VALUES ($1)`, [4 + round * 2]);
        await db.query(`INSERT INTO public.item VALUES ($1)`, [5 + round * 2]);
        await c.until(5 + round * 2);
      }
      expect(insertedIds(await c.until(7))).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect(reconnects.length).toBeGreaterThanOrEqual(2);
      expect(source.status().reconnects).toBeGreaterThanOrEqual(2);
      expect(reconnects.some((e) => /terminating connection|administrator command/i.test(e.message))).toBe(true);

      // Transactions received before the loss can still be acknowledged afterwards.
      source.acknowledge(c.received[6]!.tx);
      await vi.waitFor(
        async () => {
          const [row] = await db.query<{ lsn: string }>(`SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1`, [slot]);
          expect(compareLsn(row!.lsn, c.received[6]!.tx.endLsn)).toBeGreaterThanOrEqual(0);
        },
        { timeout: 10_000, interval: 50 },
      );
      await source.close();
      await c.done;
    });
  });

  describe('with a streamed transaction open at the time of the loss', () => {
    let db: TestDatabase;
    let role: string;

    beforeAll(async () => {
      db = await createTestDatabase(inject('postgres'), 'capture_reconnect_open');
      role = `cap_${db.database}`.slice(0, 63);
      await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
      await db.query(`CREATE TABLE public.big (id int PRIMARY KEY, payload text)`);
      await db.query(`GRANT SELECT ON public.big TO ${role}`);
    });

    afterAll(async () => {
      for (const s of sources.splice(0)) await s.close();
      await db?.drop();
      await dropRole(role);
    });

    it('drops the half-received transaction and takes it whole from the re-sent stream', async () => {
      const slot = `open_${role}`.slice(0, 63);
      await setupCapture({ connection: db.connectionConfig(), publication: 'pub_open', slot, tables: ['public.big'] });
      const source = createPostgresSource({
        // 64 kB of decoding memory: the open transaction is streamed before it commits.
        connection: { ...db.connectionConfig({ user: role }), options: '-c logical_decoding_work_mem=64kB' },
        slot,
        publication: 'pub_open',
        tables: ['public.big'],
        backoff,
      });
      sources.push(source);
      const c = collectTransactions(source);
      await source.start();
      const writer = new pg.Client(db.connectionConfig());
      await writer.connect();
      try {
        await writer.query('BEGIN');
        await writer.query(`INSERT INTO public.big SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g`);
        await vi.waitFor(() => expect(source.status().openTransactions).toBeGreaterThanOrEqual(1), { timeout: 10_000, interval: 20 });
        await db.query(`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, [slot]);
        await vi.waitFor(() => expect(source.status().reconnects).toBeGreaterThanOrEqual(1), { timeout: 10_000, interval: 20 });
        await writer.query(`INSERT INTO public.big SELECT g, repeat('y', 200) FROM generate_series(2001, 3000) g`);
        await writer.query('COMMIT');
      } finally {
        await writer.end();
      }
      await c.until(1);
      const tx = c.received[0]!.tx;
      const changes = await tx.toArray();
      expect(changes).toHaveLength(3000);
      expect(new Set(changes.map((ch) => (ch as InsertChange).after.id)).size).toBe(3000);
      await db.query(`INSERT INTO public.big VALUES (9999, 'after')`);
      expect(insertedIds(await c.until(2))).toEqual([1, 9999]);
      await source.close();
    });
  });

  describe('after PostgreSQL crashes and restarts', () => {
    let server: EmbeddedPostgres;
    const database = 'shop';
    const role = 'capture_crash';

    beforeAll(async () => {
      server = await startEmbeddedPostgres();
      await server.createDatabase(database);
      await server.createRole(role, { replication: true });
      await server.query(`CREATE TABLE public.item (id int PRIMARY KEY)`, [], { database });
      await server.query(`GRANT SELECT ON public.item TO ${role}`, [], { database });
    });

    afterAll(async () => {
      for (const s of sources.splice(0)) await s.close();
      await server?.destroy();
    });

    it('backpressure: stops reading at the in-flight bound, keeps the walsender alive with status updates, resumes on acks', async () => {
      await server.setParameters({ wal_sender_timeout: '2s' });
      await setupCapture({ connection: server.connectionConfig({ database }), publication: 'pub_bp', slot: 'bp_slot', tables: ['public.item'] });
      const source = createPostgresSource({
        connection: server.connectionConfig({ database, user: role }),
        slot: 'bp_slot',
        publication: 'pub_bp',
        tables: ['public.item'],
        backoff,
        statusIntervalMs: 300,
        maxInFlightTransactions: 2,
      });
      sources.push(source);
      await source.start();
      // 20 transactions of 500 rows each (~1 MB of pgoutput): far more than one socket read.
      for (let t = 0; t < 20; t++) {
        await server.query(`INSERT INTO public.item SELECT g FROM generate_series($1::int, $1::int + 499) g`, [100_000 + t * 500], { database });
      }
      const seen: CommittedTransaction[] = [];
      const iterator = source.transactions()[Symbol.asyncIterator]();
      const first = await iterator.next();
      seen.push(first.value as CommittedTransaction);
      await vi.waitFor(() => expect(source.status().paused).toBe(true), { timeout: 10_000, interval: 20 });
      // Outlive wal_sender_timeout several times while paused and unacknowledged.
      const replies = new Set<string>();
      await vi.waitFor(
        async () => {
          const [row] = await server.query<{ t: string | null }>(
            `SELECT r.reply_time::text AS t FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = 'bp_slot'`,
            [],
            { database },
          );
          if (row?.t) replies.add(row.t);
          expect(replies.size).toBeGreaterThanOrEqual(12); // ≥ 3.6 s at one update per 300 ms, > wal_sender_timeout
        },
        { timeout: 30_000, interval: 50 },
      );
      expect(source.status().reconnects).toBe(0);
      expect(source.status().paused).toBe(true);
      expect(source.status().inFlightTransactions).toBeLessThan(20);
      // Acknowledge as we go: everything arrives, in order.
      source.acknowledge(seen[0]!);
      while (seen.length < 20) {
        const next = await iterator.next();
        const tx = next.value as CommittedTransaction;
        seen.push(tx);
        source.acknowledge(tx);
        await tx.release();
      }
      expect(seen.map((tx) => tx.changeCount)).toEqual(Array(20).fill(500));
      expect(new Set(seen.map((tx) => tx.xid)).size).toBe(20);
      expect(source.status().reconnects).toBe(0);
      await source.close();
      await server.setParameters({ wal_sender_timeout: '60s' });
    });

    it('reconnects with backoff after a crash and restart, losing nothing', async () => {
      await setupCapture({ connection: server.connectionConfig({ database }), publication: 'pub_crash', slot: 'crash_slot', tables: ['public.item'] });
      const reconnects: number[] = [];
      const source = createPostgresSource({
        connection: server.connectionConfig({ database, user: role }),
        slot: 'crash_slot',
        publication: 'pub_crash',
        tables: ['public.item'],
        backoff,
        statusIntervalMs: 500,
        onReconnect: (_error, delayMs) => reconnects.push(delayMs),
      });
      sources.push(source);
      const c = collectTransactions(source);
      for (let i = 1; i <= 4; i++) await server.query(`INSERT INTO public.item VALUES ($1)`, [i], { database });
      expect(insertedIds(await c.until(4))).toEqual([1, 2, 3, 4]);
      source.acknowledge(c.received[1]!.tx); // 1, 2 durable; 3, 4 in flight

      await server.crash();
      // While the server is down the reader keeps trying, backing off.
      await vi.waitFor(() => expect(reconnects.length).toBeGreaterThanOrEqual(3), { timeout: 15_000, interval: 20 });
      await server.start();
      for (let i = 5; i <= 6; i++) await server.query(`INSERT INTO public.item VALUES ($1)`, [i], { database });

      expect(insertedIds(await c.until(6))).toEqual([1, 2, 3, 4, 5, 6]);
      expect(source.status().state).toBe('streaming');

      // A clean restart (fast shutdown) too.
      const before = source.status().reconnects;
      await server.restart();
      await server.query(`INSERT INTO public.item VALUES (7)`, [], { database });
      expect(insertedIds(await c.until(7))).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect(source.status().reconnects).toBeGreaterThan(before);
      source.acknowledge(c.received[6]!.tx);
      expect(source.status().inFlightTransactions).toBe(0);
      await vi.waitFor(
        async () => {
          const [row] = await server.query<{ lsn: string }>(`SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = 'crash_slot'`, [], { database });
          expect(compareLsn(row!.lsn, c.received[6]!.tx.endLsn)).toBeGreaterThanOrEqual(0);
        },
        { timeout: 10_000, interval: 50 },
      );
      await source.close();
      await c.done;

      // A fresh reader after the crash sees nothing again: everything was acknowledged.
      const fresh = createPostgresSource({ connection: server.connectionConfig({ database, user: role }), slot: 'crash_slot', publication: 'pub_crash', tables: ['public.item'], backoff });
      sources.push(fresh);
      const f = collectTransactions(fresh);
      await server.query(`INSERT INTO public.item VALUES (8)`, [], { database });
      expect(insertedIds(await f.until(1))).toEqual([8]);
      await fresh.close();
    });

    it('refuses an invalidated slot (wal_status lost) with a rebuild-needed error, at start-up and on (re)connect', async () => {
      await setupCapture({ connection: server.connectionConfig({ database }), publication: 'pub_doomed', slot: 'doomed_slot', tables: ['public.item'] });
      await server.setParameters({ max_slot_wal_keep_size: '1MB' });
      let batch = 0;
      await vi.waitFor(
        async () => {
          const from = 1_000_000 + 20_000 * batch++;
          await server.query(`INSERT INTO public.item SELECT g FROM generate_series($1::int, $1::int + 19999) g`, [from], { database });
          await server.query('SELECT pg_switch_wal()');
          await server.query('CHECKPOINT');
          const [row] = await server.query<{ wal_status: string }>(`SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'doomed_slot'`);
          expect(row?.wal_status).toBe('lost');
        },
        { timeout: 30_000, interval: 100 },
      );
      const options = { connection: server.connectionConfig({ database, user: role }), slot: 'doomed_slot', publication: 'pub_doomed', tables: ['public.item'], backoff };
      const checked = createPostgresSource(options);
      sources.push(checked);
      await expect(checked.start()).rejects.toMatchObject({ code: 'SOURCE_SLOT_INVALIDATED', message: expect.stringMatching(/Rebuild needed/) });
      await checked.close();

      // Without start-up checks the replication connection itself refuses, and does not retry.
      const unchecked = createPostgresSource({ ...options, checks: false });
      sources.push(unchecked);
      const error = await (async () => {
        for await (const _tx of unchecked.transactions()) return undefined;
        return undefined;
      })().catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'SOURCE_SLOT_INVALIDATED' });
      expect(unchecked.status()).toMatchObject({ state: 'failed', reconnects: 0 });
      await unchecked.close();
      await server.setParameters({ max_slot_wal_keep_size: -1 });
    });
  });
});
