// The acceptance check of the initial snapshot handoff (DESIGN.md invariant 1): a 200,000-row
// table, a concurrent writer doing inserts, updates (also of the primary key) and deletes
// before, during and after the slot's creation and the snapshot read. Replaying the snapshot
// records and then the stream from consistent_point reproduces exactly the table's final
// contents, and no row state appears both as a snapshot record and as a streamed change.
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createPostgresSource, type PostgresSource } from '../../src/source/index.js';
import { setupCapture } from '../../src/source/setup.js';
import { createSlotWithSnapshot, readInitialSnapshot, type ExportedSnapshotSlot } from '../../src/source/snapshot/index.js';
import { createReplayModel } from '../../src/source/snapshot/replay.js';
import type { Change, SnapshotRecord } from '../../src/source/types.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { startChurnWriter, type ChurnWriter } from '../support/churn-writer.js';
import { dropRole } from '../support/roles.js';

const ROWS = 200_000;

describe('initial snapshot handoff under a concurrent writer (200,000 rows)', () => {
  let db: TestDatabase;
  let role: string;
  let writer: ChurnWriter | undefined;
  let slot: ExportedSnapshotSlot | undefined;
  let source: PostgresSource | undefined;

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'snapshot_acceptance');
    role = `cap_${db.database}`.slice(0, 63);
    await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
  });

  afterAll(async () => {
    await writer?.stop().catch(() => undefined);
    await slot?.close();
    await source?.close();
    await db?.drop();
    await dropRole(role);
  });

  it('snapshot records + later changes reproduce the final table; no state is both read and streamed', async () => {
    const table = 'public.item';
    await db.query(`CREATE TABLE ${table} (id bigint PRIMARY KEY, version int NOT NULL, payload text NOT NULL)`);
    await db.query(`INSERT INTO ${table} SELECT i, 1, md5(i::text) FROM generate_series(1, ${ROWS}) i`);
    await db.query(`ANALYZE ${table}`);
    await db.query(`GRANT SELECT ON ${table} TO ${role}`);
    await setupCapture({ connection: db.connectionConfig(), publication: 'pub_acceptance', slot: 'snap_acceptance', tables: [table], createSlot: false });
    const capture = db.connectionConfig({ user: role });

    writer = startChurnWriter(db.connectionConfig(), table, 10_000_000, () => ROWS);
    await vi.waitFor(() => { if (writer!.ops < 50) throw new Error('writer warming up'); }, { timeout: 30_000, interval: 20 });

    const slotStarted = performance.now();
    slot = await createSlotWithSnapshot({ connection: capture, slot: 'snap_acceptance' });
    const slotSeconds = (performance.now() - slotStarted) / 1000;
    const opsAtSlot = writer.ops;
    const records: SnapshotRecord[] = [];
    const started = performance.now();
    for await (const batch of readInitialSnapshot({ connection: capture, snapshotName: slot.snapshotName, tables: [table], snapshotGeneration: '1' })) {
      records.push(...batch.records);
    }
    const seconds = (performance.now() - started) / 1000;
    await slot.close();
    // Keep writing a little after the read, then stop and mark the end of the stream.
    const opsAtRead = writer.ops;
    await vi.waitFor(() => { if (writer!.ops < opsAtRead + 200) throw new Error('writing after the snapshot'); }, { timeout: 30_000, interval: 20 });
    await writer.stop();
    await db.query(`SELECT pg_logical_emit_message(true, 'test.end', '')`);
    console.log(`slot with exported snapshot created in ${slotSeconds.toFixed(2)} s under the writer; initial snapshot: ${records.length} rows in ${seconds.toFixed(2)} s (${Math.round(records.length / seconds)} rows/s); writer: ${opsAtSlot} ops before the slot, ${opsAtRead - opsAtSlot} during the read, ${writer.ops - opsAtRead} after`);
    expect(writer.ops - opsAtSlot).toBeGreaterThanOrEqual(200);

    const changes: Change[] = [];
    source = createPostgresSource({ connection: capture, slot: 'snap_acceptance', publication: 'pub_acceptance', tables: [table], statusIntervalMs: 1_000 });
    let ended = false;
    const stream = (async () => {
      for await (const tx of source!.transactions()) {
        const cs = await tx.toArray();
        changes.push(...cs);
        source!.acknowledge(tx);
        await tx.release();
        if (cs.some((c) => c.op === 'message' && c.prefix === 'test.end')) { ended = true; return; }
      }
    })();
    await vi.waitFor(() => { if (!ended) throw new Error(`waiting for the end marker; ${changes.length} changes`); }, { timeout: 60_000, interval: 50 });
    await stream;

    // No overlap: every row state (id, version) is either read or streamed, never both.
    const state = (row: Record<string, unknown>) => `${String(row.id)}@${String(row.version)}`;
    const read = new Set(records.map((r) => state(r.change.after)));
    const overlap = changes.flatMap((c) => (c.op === 'insert' || c.op === 'update') && read.has(state(c.after)) ? [state(c.after)] : []);
    expect(overlap).toEqual([]);
    // No gap: replay reproduces the final table, and every streamed update/delete finds its row
    // (read by the snapshot or inserted by the stream).
    const model = createReplayModel();
    for (const r of records) model.apply(r);
    const missing: string[] = [];
    for (const c of changes) {
      if (c.op === 'update' || c.op === 'delete') {
        const key = (c.op === 'update' ? c.oldKey : null) ?? c.key;
        if (!model.has(table, key)) missing.push(`${c.op} ${String(key.id)}`);
      }
      model.apply(c);
    }
    expect(missing).toEqual([]);
    const replayed = model.rows(table).map((r) => ({ id: Number(r.id), version: r.version as number, payload: r.payload as string })).sort((a, b) => a.id - b.id);
    const actual = (await db.query<{ id: string; version: number; payload: string }>(`SELECT id, version, payload FROM ${table} ORDER BY id`))
      .map((r) => ({ id: Number(r.id), version: r.version, payload: r.payload }));
    expect(replayed.length).toBe(actual.length);
    expect(replayed).toEqual(actual);
    expect(records.every((r) => r.kind === 'snapshot' && r.change.op === 'read')).toBe(true);
  });
});
