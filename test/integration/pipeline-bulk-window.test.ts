// Bulk transactions meet an incremental snapshot: a bulk UPDATE that carries an ad hoc snapshot
// request in its own transaction (the request is found in a large transaction's changes), and a
// second bulk UPDATE committed while that snapshot's watermark windows run — a large transaction
// through the window, mapped from its change sequence. Every order stream must hold both updates
// in order and at most one snapshot record (none where the update changed the row inside the
// chunk's window: the watermark algorithm drops that row, the change stands for it), which
// carries the status the stream had reached where the record sits (nothing read is older than
// what was streamed before it).
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { defineConfig } from '../../src/config/index.js';
import { setupCapture } from '../../src/source/setup.js';
import { encodeSnapshotRequest, newSnapshotRequest, SNAPSHOT_REQUEST_PREFIX } from '../../src/source/snapshot/index.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { waitFor } from '../resilience/assembler-process.js';
import { orders, ORDERS_CONTRACTS, ORDERS_SCHEMA } from '../support/orders/mapper.js';
import { dropRole } from '../support/roles.js';

/** More than LARGE_TRANSACTION_CHANGES: both updates take the large path. */
const M = 12_000;
const NAME = 'bulkwin';

let db: TestDatabase;
let kdb: InMemoryKurrentDB;
let assembler: Assembler;
let role: string;

function decode(bytes: Uint8Array): Record<string, unknown> {
  return JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, unknown>;
}

beforeAll(async () => {
  const server = inject('postgres');
  db = await createTestDatabase(server, 'bkwin');
  role = `cap_${db.database}`.slice(0, 63);
  await db.query(ORDERS_SCHEMA);
  // Existing rows: only a snapshot makes events of them.
  await db.query(`INSERT INTO orders SELECT g, 'customer-' || (g % 97), 'new', g + 0.5, 'secret' FROM generate_series(1, ${M}) g`);
  await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${server.password}'`);
  await db.query(`GRANT SELECT ON public.orders TO ${role}`);
  await setupCapture({ connection: db.connectionConfig(), publication: 'bulkwin_pub', slot: `bulkwin_${db.database.slice(-8)}`, tables: ['public.orders'] });
  kdb = await startInMemoryKurrentDB();
  const captureUrl = `postgresql://${role}:${encodeURIComponent(server.password)}@${server.host}:${server.port}/${db.database}`;
  assembler = createAssembler(
    defineConfig({
      name: NAME,
      source: { connection: captureUrl, slot: `bulkwin_${db.database.slice(-8)}`, publication: 'bulkwin_pub', statusIntervalMs: 500 },
      destination: { connectionString: kdb.connectionString, retry: { initialDelayMs: 50, maxDelayMs: 500 } },
      mappers: [orders],
      contracts: { dir: ORDERS_CONTRACTS },
      snapshot: { mode: 'never', chunkSize: 100 },
    }),
    { logger: { info() {}, warn() {}, error: (m, f) => console.error(m, f) } },
  );
  void assembler.run().catch(() => undefined);
  await waitFor('the assembler to run', () => assembler.status().state === 'running', { timeoutMs: 60_000 });
});

afterAll(async () => {
  await assembler?.stop();
  await kdb?.close();
  await db?.drop();
  if (role) await dropRole(role);
});

describe('bulk transactions and an incremental snapshot', () => {
  it('a request inside a bulk transaction starts the snapshot; a bulk update through its windows; every stream exact', { timeout: 300_000 }, async () => {
    // Appends take a while, so the snapshot (120 chunks) is still running when the second update comes.
    kdb.setAppendLatency(10);
    const request = newSnapshotRequest({ assembler: NAME, tables: ['public.orders'] });
    await db.query(`BEGIN; SELECT pg_logical_emit_message(true, '${SNAPSHOT_REQUEST_PREFIX}', '${encodeSnapshotRequest(request)}'); UPDATE orders SET status = 'paid'; COMMIT;`);
    await waitFor('the ad hoc snapshot to start', () => assembler.status().snapshot?.action === 'ad-hoc-snapshot', { timeoutMs: 120_000 });
    await db.query(`UPDATE orders SET status = 'shipped'`);
    const [row] = await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    const second = row!.lsn;
    // The second update is durable while the snapshot is still running: it went through the window.
    const atSecond = await waitFor(
      'the second update to be durable',
      () => {
        const s = assembler.status();
        return (s.events.byType['OrderStatusChanged'] ?? 0) >= 2 * M ? { finished: s.snapshot?.finished ?? true, durable: s.lag.durableLsn } : false;
      },
      { timeoutMs: 240_000, intervalMs: 20 },
    );
    expect(atSecond.finished, 'the snapshot finished before the second bulk update was handled: it did not go through a window').toBe(false);
    kdb.setAppendLatency(0);
    await waitFor('the snapshot to finish', () => assembler.status().snapshot?.finished === true, { timeoutMs: 240_000 });
    expect(assembler.status().transactions.sliced).toBeGreaterThanOrEqual(2);
    expect(second).toBeTruthy();

    const wrong: string[] = [];
    let superseded = 0;
    for (let id = 1; id <= M; id++) {
      const events = kdb.readStreamEvents(`order-${id}`).map((e) => ({ type: e.type, status: String(decode(e.data)['status']) }));
      const updates = events.filter((e) => e.type === 'OrderStatusChanged').map((e) => e.status);
      const imports = events.filter((e) => e.type === 'OrderImported');
      let status = 'new';
      let ok = JSON.stringify(updates) === JSON.stringify(['paid', 'shipped']) && imports.length <= 1 && events.length === 2 + imports.length;
      if (imports.length === 0) superseded += 1;
      for (const e of events) {
        if (e.type === 'OrderStatusChanged') status = e.status;
        // The record carries the state at the point where it sits in the stream: never an older one.
        else if (e.status !== status) ok = false;
      }
      if (!ok && wrong.length < 5) wrong.push(`order-${id}: ${events.map((e) => `${e.type}:${e.status}`).join(', ')}`);
    }
    expect(wrong).toEqual([]);
    console.log(`pipeline-bulk-window: ${M - superseded} orders imported by the snapshot, ${superseded} chunk rows superseded by the bulk update in their window`);
    expect(superseded).toBeLessThan(M);
  });
});
