// The embedded PostgreSQL rig itself: exported snapshots + pgoutput streaming under a
// least-privilege role, crash recovery, runtime parameters, and cleanup.
import { randomBytes } from 'node:crypto';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { LogicalReplicationService, PgoutputPlugin, type Pgoutput } from 'pg-logical-replication';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createTestDatabase, startEmbeddedPostgres, type EmbeddedPostgres, type TestDatabase } from '../../src/testing/postgres.js';

interface Streamed {
  inserts: number[];
  commits: number;
}

/**
 * Streams pgoutput from `slot` starting at `startLsn` until `done` holds, then disconnects.
 * Acknowledges nothing (auto off, timer off), so the slot's position does not move.
 */
async function streamFromSlot(
  config: pg.ClientConfig,
  slot: string,
  startLsn: string,
  publication: string,
  done: (s: Streamed) => boolean,
): Promise<Streamed> {
  const service = new LogicalReplicationService(config, { acknowledge: { auto: false, timeoutSeconds: 0 } });
  const streamed: Streamed = { inserts: [], commits: 0 };
  const errors: unknown[] = [];
  service.on('error', (e: unknown) => errors.push(e));
  service.on('data', (_lsn: string, msg: Pgoutput.Message) => {
    if (msg.tag === 'insert') streamed.inserts.push(Number(msg.new.id));
    if (msg.tag === 'commit') streamed.commits++;
  });
  const plugin = new PgoutputPlugin({ protoVersion: 1, publicationNames: [publication] });
  const subscription = service.subscribe(plugin, slot, startLsn).catch((e: unknown) => errors.push(e));
  try {
    await vi.waitFor(
      () => {
        if (errors.length > 0) throw new Error(`replication failed: ${String(errors[0])}`);
        if (!done(streamed)) throw new Error(`still waiting; got inserts ${JSON.stringify(streamed.inserts)}`);
      },
      { timeout: 20_000, interval: 25 },
    );
  } finally {
    await service.destroy();
    await subscription;
  }
  return streamed;
}

async function withClient<T>(config: pg.ClientConfig, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(config);
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

const ids = (rows: { id: number }[]): number[] => rows.map((r) => Number(r.id));

describe('shared server from globalSetup', () => {
  let db: TestDatabase | undefined;
  const role = `capture_${randomBytes(4).toString('hex')}`;
  const rolePassword = randomBytes(8).toString('hex');

  afterAll(async () => {
    if (!db) return;
    await db.drop();
    // Roles are cluster-wide: drop ours from the maintenance database.
    const server = inject('postgres');
    await withClient({ host: server.host, port: server.port, user: server.superuser, password: server.password, database: 'postgres' }, (c) =>
      c.query(`DROP ROLE IF EXISTS ${role}`),
    );
  });

  it('exports a snapshot from a slot made by a LOGIN REPLICATION role and streams only later changes', async () => {
    db = await createTestDatabase(inject('postgres'), 'rig');
    await db.query(`CREATE ROLE ${role} WITH LOGIN REPLICATION PASSWORD '${rolePassword}'`);
    await db.query('CREATE TABLE items (id int PRIMARY KEY, label text NOT NULL)');
    await db.query(`INSERT INTO items VALUES (1, 'before'), (2, 'before')`);
    await db.query(`GRANT SELECT ON items TO ${role}`);
    await db.query('CREATE PUBLICATION p FOR TABLE items');
    const asCapture = db.connectionConfig({ user: role, password: rolePassword });

    const [{ rolsuper }] = await db.query<{ rolsuper: boolean }>('SELECT rolsuper FROM pg_roles WHERE rolname = $1', [role]) as [{ rolsuper: boolean }];
    expect(rolsuper).toBe(false);

    // The exported snapshot lives as long as the replication connection runs no other command.
    const replication = new pg.Client({ ...asCapture, replication: 'database' } as pg.ClientConfig);
    replication.on('error', () => undefined);
    await replication.connect();
    let consistentPoint: string;
    try {
      const created = await replication.query<{ slot_name: string; consistent_point: string; snapshot_name: string; output_plugin: string }>(
        `CREATE_REPLICATION_SLOT s_rig LOGICAL pgoutput (SNAPSHOT 'export')`,
      );
      const slot = created.rows[0]!;
      expect(slot).toMatchObject({ slot_name: 's_rig', output_plugin: 'pgoutput' });
      expect(slot.consistent_point).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
      expect(slot.snapshot_name).toMatch(/\S/);
      consistentPoint = slot.consistent_point;

      await db.query(`INSERT INTO items VALUES (3, 'after'), (4, 'after')`);

      const inSnapshot = await withClient(asCapture, async (c) => {
        await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        await c.query(`SET TRANSACTION SNAPSHOT '${slot.snapshot_name}'`);
        const r = await c.query<{ id: number }>('SELECT id FROM items ORDER BY id');
        await c.query('COMMIT');
        return ids(r.rows);
      });
      expect(inSnapshot).toEqual([1, 2]);
      expect(ids(await db.query('SELECT id FROM items ORDER BY id'))).toEqual([1, 2, 3, 4]);
    } finally {
      await replication.end();
    }

    const streamed = await streamFromSlot(asCapture, 's_rig', consistentPoint, 'p', (s) => s.inserts.includes(4) && s.commits >= 1);
    expect(streamed.inserts).toEqual([3, 4]);
  });
});

describe('own server: crash, parameters, destroy', () => {
  let server: EmbeddedPostgres | undefined;

  beforeAll(async () => {
    server = await startEmbeddedPostgres();
  });

  afterAll(async () => {
    await server?.destroy();
  });

  it('keeps committed rows and the slot across a SIGKILL of the postmaster, and streams after recovery', async () => {
    const pgServer = server!;
    await pgServer.createDatabase('crash');
    const q = (sql: string, params?: unknown[]) => pgServer.query(sql, params, { database: 'crash' });
    await q('CREATE TABLE items (id int PRIMARY KEY)');
    await q('CREATE PUBLICATION p FOR TABLE items');
    await q(`SELECT pg_create_logical_replication_slot('crash_slot', 'pgoutput')`);
    for (const id of [1, 2, 3]) await q('INSERT INTO items VALUES ($1)', [id]);

    const oldPid = pgServer.pid!;
    await pgServer.crash();
    expect(pgServer.pid).toBeUndefined();
    expect(() => process.kill(oldPid, 0)).toThrow();
    await expect(pgServer.query('SELECT 1')).rejects.toThrow();

    await pgServer.start();
    expect(pgServer.pid).not.toBe(oldPid);
    expect(await fs.readFile(pgServer.logFile, 'utf8')).toContain('automatic recovery in progress');

    expect(ids(await q('SELECT id FROM items ORDER BY id'))).toEqual([1, 2, 3]);
    const slots = await pgServer.query<{ slot_name: string; database: string; wal_status: string }>(
      `SELECT slot_name, database, wal_status FROM pg_replication_slots`,
    );
    expect(slots).toEqual([{ slot_name: 'crash_slot', database: 'crash', wal_status: 'reserved' }]);

    await q('INSERT INTO items VALUES (4)');
    // 0/0: start at the slot's confirmed_flush_lsn (nothing was acknowledged, so everything since creation).
    const streamed = await streamFromSlot(pgServer.connectionConfig({ database: 'crash' }), 'crash_slot', '0/0', 'p', (s) => s.inserts.includes(4));
    expect(streamed.inserts).toEqual([1, 2, 3, 4]);
  });

  it('sets parameters by reload, and restarts only when a parameter needs it', async () => {
    const pgServer = server!;
    const pidBefore = pgServer.pid;
    await pgServer.setParameters({ logical_decoding_work_mem: '64kB', max_slot_wal_keep_size: '64MB' });
    expect(await pgServer.query('SHOW logical_decoding_work_mem')).toEqual([{ logical_decoding_work_mem: '64kB' }]);
    expect(await pgServer.query('SHOW max_slot_wal_keep_size')).toEqual([{ max_slot_wal_keep_size: '64MB' }]);
    expect(pgServer.pid).toBe(pidBefore);

    await pgServer.setParameters({ max_replication_slots: 40 });
    expect(await pgServer.query('SHOW max_replication_slots')).toEqual([{ max_replication_slots: '40' }]);
    expect(pgServer.pid).not.toBe(pidBefore);
    // Rig defaults are still in force after the restart.
    expect(await pgServer.query('SHOW wal_level')).toEqual([{ wal_level: 'logical' }]);
  });

  it('destroy() stops the server and removes its temporary directory, and can be called again', async () => {
    const pgServer = server!;
    const baseDir = path.dirname(pgServer.dataDir);
    expect(path.dirname(baseDir)).toBe(path.resolve(os.tmpdir()));
    expect(existsSync(pgServer.dataDir)).toBe(true);
    await pgServer.destroy();
    expect(existsSync(baseDir)).toBe(false);
    await expect(pgServer.query('SELECT 1')).rejects.toThrow();
    await expect(pgServer.destroy()).resolves.toBeUndefined();
  });
});

describe('startEmbeddedPostgres options', () => {
  it('applies start-up parameters and keeps a caller-given baseDir, removing only what it created', async () => {
    const baseDir = await fs.mkdtemp(path.join(os.tmpdir(), 'rig-basedir-'));
    let server: EmbeddedPostgres | undefined;
    try {
      server = await startEmbeddedPostgres({ baseDir, parameters: { max_slot_wal_keep_size: '32MB', track_commit_timestamp: true } });
      expect(server.dataDir).toBe(path.join(baseDir, 'data'));
      expect(await server.query('SHOW max_slot_wal_keep_size')).toEqual([{ max_slot_wal_keep_size: '32MB' }]);
      expect(await server.query('SHOW track_commit_timestamp')).toEqual([{ track_commit_timestamp: 'on' }]);
      expect(await server.query('SHOW listen_addresses')).toEqual([{ listen_addresses: '127.0.0.1' }]);
      await server.destroy();
      expect(existsSync(baseDir)).toBe(true);
      expect(await fs.readdir(baseDir)).toEqual([]);
    } finally {
      await server?.destroy();
      await fs.rm(baseDir, { recursive: true, force: true });
    }
  });
});
