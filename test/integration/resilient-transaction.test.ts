// The chaos writer's transactions (test/support/resilient-transaction.ts) when a COMMIT's answer
// is lost: a proxy between the client and PostgreSQL forwards the COMMIT, lets the server answer,
// and cuts the client's connection before the answer reaches it. The writer must find out from
// the marker row whether it committed — once when it did (not written again), once when it did
// not (written again) — so its history holds exactly what committed.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { createResilientConnection, MARKER_TABLE_SQL, type ResilientStats } from '../support/resilient-transaction.js';

/** A TCP proxy to PostgreSQL that, when armed, drops the client connection instead of relaying the answer to a COMMIT. */
function startProxy(target: { host: string; port: number }) {
  let armed: 'after-answer' | 'before-commit' | null = null;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    let commitSent = false;
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk) => {
      // A simple-protocol Query message 'Q' … "COMMIT": the client commits now.
      if (armed && chunk[0] === 0x51 && chunk.toString('utf8').includes('COMMIT')) {
        if (armed === 'before-commit') {
          armed = null;
          return cut(); // never reaches the server
        }
        armed = null;
        commitSent = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      // The server answered the COMMIT (it committed): the client never hears of it.
      if (commitSent) return cut();
      client.write(chunk);
    });
    for (const s of [client, upstream]) {
      s.on('error', cut);
      s.on('close', () => {
        sockets.delete(s);
        cut();
      });
    }
  });
  return new Promise<{ port: number; arm(mode: 'after-answer' | 'before-commit'): void; close(): Promise<void> }>((resolve) => {
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        arm: (mode) => void (armed = mode),
        close: () => new Promise<void>((done) => (sockets.forEach((s) => s.destroy()), server.close(() => done()))),
      }),
    );
  });
}

describe('a transaction whose COMMIT answer is lost', () => {
  const server = inject('postgres');
  let db: TestDatabase;
  let proxy: Awaited<ReturnType<typeof startProxy>>;

  beforeAll(async () => {
    db = await createTestDatabase(server, 'resilient_tx');
    await db.query(MARKER_TABLE_SQL);
    await db.query('CREATE TABLE item (id int PRIMARY KEY)');
    proxy = await startProxy({ host: server.host, port: server.port });
  });

  afterAll(async () => {
    await proxy?.close();
    await db?.drop();
  });

  it('is found committed by its marker and not written again; one cut before COMMIT is written again', async () => {
    const stats: ResilientStats = { retries: 0, unknownCommitted: 0, unknownAborted: 0 };
    const conn = createResilientConnection({ ...db.connectionConfig(), port: proxy.port }, stats, 'resilient-test', 30_000);
    let attempts = 0;
    const insert = (id: number) => async (client: import('pg').Client) => {
      attempts += 1;
      await client.query('INSERT INTO item (id) VALUES ($1)', [id]);
      return { rows: 1, events: {} };
    };
    try {
      proxy.arm('after-answer');
      await conn.transaction(insert(1));
      expect(attempts).toBe(1); // committed, found by its marker: not tried again (a retry would fail on the key)
      expect(stats).toEqual({ retries: 0, unknownCommitted: 1, unknownAborted: 0 });

      proxy.arm('before-commit');
      await conn.transaction(insert(2));
      expect(attempts).toBe(3); // the COMMIT never reached the server: nothing committed, written again
      expect(stats).toEqual({ retries: 1, unknownCommitted: 1, unknownAborted: 1 });

      expect((await db.query<{ id: number }>('SELECT id FROM item ORDER BY id')).map((r) => r.id)).toEqual([1, 2]);
    } finally {
      await conn.close();
    }
  });
});
