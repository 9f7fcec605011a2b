// The resumed snapshot's own destination calls wait out a KurrentDB outage instead of failing the
// line — both found by the chaos run (`run` exited 1 on an UnavailableError):
// - recordsLanded (src/pipeline/snapshot-landed.ts): a resumed initial snapshot met the first
//   change of a row whose record the killed process had left in flight while KurrentDB was down;
// - the progress store (src/pipeline/snapshot-store.ts): a load or save during an outage longer
//   than its five attempts on one client (≈ 2 s).
// Real client, in-memory KurrentDB stopped and restarted with its data.
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { afterEach, describe, expect, it } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { mapUnit } from '../../src/mapping/index.js';
import { recordsLanded } from '../../src/pipeline/snapshot-landed.js';
import { createKurrentDBSnapshotStore } from '../../src/pipeline/snapshot-store.js';
import { newSnapshotProgress } from '../../src/source/snapshot/index.js';
import type { SnapshotRecord } from '../../src/source/types.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';

const ASSEMBLER = 'landed';
const SYSTEM = '7000000000000000001';

function invoiceRecord(id: string): SnapshotRecord {
  const after = { id, customer_id: 'cus_1', status: 'draft', currency: 'EUR', total: '0.00' };
  return { kind: 'snapshot', snapshotGeneration: '1', table: 'public.invoice', change: { op: 'read', table: 'public.invoice', after, key: { id }, snapshotGeneration: '1' } } as SnapshotRecord;
}

describe('recordsLanded across a KurrentDB outage', () => {
  let kurrent: InMemoryKurrentDB | null = null;
  afterEach(async () => {
    await kurrent?.close();
    kurrent = null;
  });

  it('waits until KurrentDB is back and answers as it would have', { timeout: 30_000 }, async () => {
    kurrent = await startInMemoryKurrentDB();
    const db = kurrent;
    const landed = invoiceRecord('inv_landed');
    const lost = invoiceRecord('inv_lost');
    // The landed record's event is in its stream (the id the mapper gives it), the lost one's is not.
    const [event] = mapUnit(mappers, landed, { assembler: ASSEMBLER, sourceIdentity: SYSTEM }).events;
    const client = KurrentDBClient.connectionString(db.connectionString);
    await client.appendToStream(event!.stream, jsonEvent({ id: event!.id, type: event!.type, data: { invoiceId: 'inv_landed' } }));
    await client.dispose();

    const config = { name: ASSEMBLER, mappers, destination: { connectionString: db.connectionString, mode: 'auto' as const, retry: { initialDelayMs: 20, maxDelayMs: 100 } } };
    const positions = [{ lsn: '0/100', sequence: 1 }, { lsn: '0/100', sequence: 2 }];
    await db.stop();
    const asked = recordsLanded(config, SYSTEM, [landed, lost], positions);
    // Back after the reads have failed a few times (the failures are what is under test).
    const outage = new Promise<void>((resolve, reject) => setTimeout(() => db.restart().then(resolve, reject), 500));
    const answer = await asked;
    await outage;
    expect(answer).toEqual(['all', 'none']);
  });

  it('gives up after maxAttempts when the policy has one', { timeout: 30_000 }, async () => {
    kurrent = await startInMemoryKurrentDB();
    const config = { name: ASSEMBLER, mappers, destination: { connectionString: kurrent.connectionString, mode: 'auto' as const, retry: { initialDelayMs: 10, maxDelayMs: 20, maxAttempts: 3 } } };
    await kurrent.stop();
    await expect(recordsLanded(config, SYSTEM, [invoiceRecord('inv_x')], [{ lsn: '0/100', sequence: 1 }])).rejects.toThrow(/Unavailable|UNAVAILABLE|connect/i);
  });
});

describe('the snapshot progress store across a KurrentDB outage', () => {
  let kurrent: InMemoryKurrentDB | null = null;
  afterEach(async () => {
    await kurrent?.close();
    kurrent = null;
  });

  it('saves and loads once KurrentDB is back, after an outage longer than its old five attempts', { timeout: 30_000 }, async () => {
    kurrent = await startInMemoryKurrentDB();
    const db = kurrent;
    const store = createKurrentDBSnapshotStore(db.connectionString, ASSEMBLER, { initialDelayMs: 50, maxDelayMs: 200 });
    try {
      const progress = newSnapshotProgress({ generation: '1', kind: 'initial', mode: 'initial', tables: ['public.invoice'], reason: 'test', consistentPoint: '0/100' });
      await store.save(progress, new Map());
      await db.stop();
      const saved = store.save({ ...progress, reason: 'saved during the outage' }, new Map());
      const outage = new Promise<void>((resolve, reject) => setTimeout(() => db.restart().then(resolve, reject), 3_000));
      await saved;
      await outage;
      await db.stop();
      const loaded = store.load();
      const second = new Promise<void>((resolve, reject) => setTimeout(() => db.restart().then(resolve, reject), 3_000));
      expect((await loaded)?.progress.reason).toBe('saved during the outage');
      await second;
    } finally {
      await store.close();
    }
  });

  it('without a retry policy (a CLI command) gives up after five attempts', { timeout: 30_000 }, async () => {
    kurrent = await startInMemoryKurrentDB();
    const store = createKurrentDBSnapshotStore(kurrent.connectionString, ASSEMBLER);
    try {
      await kurrent.stop();
      await expect(store.load()).rejects.toThrow(/Unavailable|UNAVAILABLE|connect/i);
    } finally {
      await store.close();
    }
  });
});
