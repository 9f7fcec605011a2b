// Snapshot throughput and memory: a table of ~100-byte rows read at an exported snapshot
// without keeping the records, once by COPY and once by cursor, printing rows/s and peak RSS.
// 1,000,000 rows (about 20 s here, so it runs in `npm test`; EA_SNAPSHOT_ROWS overrides the size).
// Asserts behaviour only: every row arrives, in key order, and memory stays bounded.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSlotWithSnapshot, readInitialSnapshot, type ExportedSnapshotSlot, type SnapshotReadMethod } from '../../src/source/snapshot/index.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { dropRole } from '../support/roles.js';

const ROWS = Number(process.env.EA_SNAPSHOT_ROWS ?? 1_000_000);
const MiB = 1024 * 1024;

describe(`snapshot of ${ROWS.toLocaleString('en')} rows with bounded memory`, () => {
  let db: TestDatabase;
  let role: string;
  let slot: ExportedSnapshotSlot | undefined;

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'snapshot_heavy');
    role = `cap_${db.database}`.slice(0, 63);
    await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
    await db.query(`CREATE TABLE public.wide (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL, created timestamptz NOT NULL, note text)`);
    await db.query(`INSERT INTO public.wide SELECT i, 'customer-' || (i % 5000), (i % 100000) / 100.0, '2024-01-01 00:00:00+00'::timestamptz + i * interval '1 second', md5(i::text) || md5((i + 1)::text) FROM generate_series(1, ${ROWS}) i`);
    await db.query(`ANALYZE public.wide`);
    await db.query(`GRANT SELECT ON public.wide TO ${role}`);
  }, 300_000);

  afterAll(async () => {
    await slot?.close();
    await db?.drop();
    await dropRole(role);
  });

  it('streams every row in key order by COPY and by cursor; prints rows/s and peak RSS', async () => {
    slot = await createSlotWithSnapshot({ connection: db.connectionConfig({ user: role }), slot: 'snap_heavy' });
    const results: Record<string, { seconds: number; rowsPerSecond: number; peakRssMiB: number; rssGrowthMiB: number }> = {};
    for (const method of ['copy', 'cursor'] as SnapshotReadMethod[]) {
      globalThis.gc?.();
      const rssBefore = process.memoryUsage().rss;
      let peak = rssBefore;
      let count = 0;
      let last = 0n;
      let ordered = true;
      const started = performance.now();
      for await (const batch of readInitialSnapshot({ connection: db.connectionConfig({ user: role }), snapshotName: slot.snapshotName, tables: ['public.wide'], snapshotGeneration: '1', method, batchRows: 1000 })) {
        for (const r of batch.records) {
          const id = r.change.key.id as bigint;
          if (id <= last) ordered = false;
          last = id;
        }
        count += batch.records.length;
        if ((count & 0x3fff) < batch.records.length) peak = Math.max(peak, process.memoryUsage().rss);
      }
      const seconds = (performance.now() - started) / 1000;
      peak = Math.max(peak, process.memoryUsage().rss);
      results[method] = { seconds: Number(seconds.toFixed(2)), rowsPerSecond: Math.round(count / seconds), peakRssMiB: Math.round(peak / MiB), rssGrowthMiB: Math.round((peak - rssBefore) / MiB) };
      expect(count).toBe(ROWS);
      expect(ordered).toBe(true);
      // ~150 bytes per row of text: holding the table would take well over 100 MiB at 1M rows.
      expect(peak - rssBefore).toBeLessThan(150 * MiB);
    }
    console.log(`snapshot of ${ROWS} rows: ${JSON.stringify(results)}`);
  }, 600_000);
});
