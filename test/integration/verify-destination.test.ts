// The destination-vs-source check: it passes on a faithful delivery and fails, naming each
// problem, when a copy of that delivery has an event missing, duplicated, extra, reordered or altered.
// The delivery here is hand-wired (source → mapUnit → KurrentDB sink, acknowledging after each
// append) so the verifier is tested independently of the pipeline.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { KurrentDBClient, jsonEvent, NO_STREAM, type AppendStreamState } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { createInvoicingWorkload, type WorkloadCounts } from '../../examples/invoicing/workload.js';
import { mapUnit, mapperRequirements, type MapContext } from '../../src/mapping/index.js';
import { createKurrentDBSink } from '../../src/sink/index.js';
import { createPostgresSource, type PostgresSourceTable } from '../../src/source/index.js';
import { captureRoleSql, setupCapture } from '../../src/source/setup.js';
import type { SourceTransaction } from '../../src/source/types.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import {
  compareEvents,
  createReferenceSlot,
  formatDestinationReport,
  readDestination,
  verifyDestination,
  type DestinationEvent,
  type VerifyDestinationOptions,
} from '../../src/testing/verify-destination.js';

const ASSEMBLER = 'invoicing';
const SLOT = 'assembler';
const REFERENCE = 'assembler_ref';
const PUBLICATION = 'invoicing_pub';
const STOP_PREFIX = 'test.hand-wired-stop';
const tables: PostgresSourceTable[] = Object.entries(mapperRequirements(mappers)).map(([table, req]) => ({ table, needsOldValues: req.needsOldValues }));

let db: TestDatabase;
let kurrent: InMemoryKurrentDB;
let capture: string;
let workloadCounts: WorkloadCounts;

/** Delivers every transaction committed before the call: source → mapUnit → sink, ack after each append. */
async function handWiredDelivery(): Promise<void> {
  await db.query(`SELECT pg_logical_emit_message(true, $1, 'stop')`, [STOP_PREFIX]);
  const source = createPostgresSource({ connection: capture, slot: SLOT, publication: PUBLICATION, tables });
  const sink = await createKurrentDBSink({ connectionString: kurrent.connectionString, assembler: ASSEMBLER });
  try {
    let context: MapContext | null = null;
    for await (const tx of source.transactions()) {
      const changes = await tx.toArray();
      if (changes.some((c) => c.op === 'message' && c.prefix === STOP_PREFIX)) break;
      context ??= { assembler: ASSEMBLER, sourceIdentity: String(source.status().systemId) };
      const unit: SourceTransaction = { ...tx, kind: 'transaction', changes };
      const { events, failed } = mapUnit(mappers, unit, context);
      await sink.append({ position: tx.position, events: [...events, ...failed] });
      source.acknowledge(tx);
      await tx.release();
    }
  } finally {
    await source.close();
    await sink.close();
  }
}

function options(connectionString: string): VerifyDestinationOptions {
  return {
    source: { connection: db.connectionString, slot: REFERENCE, publication: PUBLICATION },
    destination: { connectionString },
    mappers,
    assembler: ASSEMBLER,
  };
}

beforeAll(async () => {
  db = await createTestDatabase(inject('postgres'), 'verify_destination');
  kurrent = await startInMemoryKurrentDB();
  await db.query(await readFile(new URL('../../examples/invoicing/schema.sql', import.meta.url), 'utf8'));
  const role = `capture_${randomBytes(4).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  await db.query(captureRoleSql({ role, tables: tables.map((t) => t.table), database: db.database, password }));
  capture = `postgresql://${role}:${password}@${new URL(db.connectionString).host}/${db.database}`;
  await setupCapture({ connection: db.connectionString, publication: PUBLICATION, slot: SLOT, tables: tables.map((t) => t.table) });
  await createReferenceSlot(db.connectionString, REFERENCE);

  const workload = createInvoicingWorkload({ connection: db.connectionString, seed: 7, concurrency: 2, seedBatchSize: 10 });
  try {
    await workload.seed(25);
    // More than the source's default in-flight limit (1000): the never-acknowledged reference must not stall.
    workloadCounts = await workload.run({ transactions: 1_100 });
  } finally {
    await workload.close();
  }
  await handWiredDelivery();
});

afterAll(async () => {
  await kurrent?.close();
  await db?.drop(); // drops the slots too
  // Roles outlive their database; this one owned nothing there, so it can go now.
  if (capture) {
    const admin = new pg.Client(createServerConfig());
    await admin.connect();
    try {
      await admin.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(new URL(capture).username)}`);
    } finally {
      await admin.end();
    }
  }
});

function createServerConfig(): pg.ClientConfig {
  const server = inject('postgres');
  return { host: server.host, port: server.port, user: server.superuser, password: server.password, database: 'postgres' };
}

describe('verifyDestination', () => {
  it('holds for a faithful delivery and agrees with what the workload did', async () => {
    const report = await verifyDestination(options(kurrent.connectionString));
    expect(formatDestinationReport(report)).toMatch(/^destination check: OK/);
    expect(report.ok).toBe(true);
    expect(report.referenceTransactions).toBe(workloadCounts.transactions);
    for (const [type, count] of Object.entries(workloadCounts.changeEvents)) expect(report.byType[type]?.expected ?? 0).toBe(count);
    expect(report.expectedEvents).toBe(Object.values(workloadCounts.changeEvents).reduce((a, b) => a + b, 0));
    expect(report.actualEvents).toBe(report.expectedEvents);
    // Verifying again gives the same expectation: the reference slot is never acknowledged.
    expect((await verifyDestination(options(kurrent.connectionString))).expectedEvents).toBe(report.expectedEvents);
  });

  it('catches a missing, a duplicated, an extra, a reordered and an altered event in a copy', async () => {
    const original = await readDestination(kurrent.connectionString, (s) => s.startsWith('$') || s.startsWith('event-assembler.'));
    const byStream = new Map<string, DestinationEvent[]>();
    for (const e of original) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e]);
    const invoiceStreams = [...byStream.entries()].filter(([s, events]) => s.startsWith('invoice-') && events.length >= 2).map(([s]) => s);
    expect(invoiceStreams.length).toBeGreaterThanOrEqual(4);
    const [missingIn, duplicatedIn, reorderedIn, alteredIn] = invoiceStreams as [string, string, string, string];
    const dropped = byStream.get(missingIn)![1]!;
    const duplicate = byStream.get(duplicatedIn)![0]!;
    const altered = byStream.get(alteredIn)![0]!;

    const copy = await startInMemoryKurrentDB();
    const client = KurrentDBClient.connectionString(copy.connectionString);
    try {
      for (const [stream, events] of byStream) {
        let list = events.filter((e) => e !== dropped);
        if (stream === reorderedIn) list = [list[1]!, list[0]!, ...list.slice(2)];
        if (stream === alteredIn) list = list.map((e) => (e === altered ? { ...e, data: { ...(e.data as object), tampered: true } } : e));
        if (stream === duplicatedIn) list = [...list, duplicate];
        // One event per append with a specific expected revision: the server's weak
        // idempotency (for `any`) would swallow the injected duplicate.
        let revision: AppendStreamState = NO_STREAM;
        for (const e of list) {
          const result: { nextExpectedRevision: bigint } = await client.appendToStream(stream, jsonEvent({ id: e.id, type: e.type, data: e.data as Record<string, unknown> }), { streamState: revision });
          revision = result.nextExpectedRevision;
        }
      }
      await client.appendToStream('invoice-not-from-the-source', jsonEvent({ type: 'InvoiceDrafted', data: { invoiceId: 'not-from-the-source' } }), { streamState: NO_STREAM });

      const report = await verifyDestination(options(copy.connectionString));
      expect(report.ok).toBe(false);
      expect(report.missing).toEqual([{ stream: missingIn, id: dropped.id, type: dropped.type }]);
      expect(report.duplicated).toEqual([{ stream: duplicatedIn, id: duplicate.id, type: duplicate.type, count: 2 }]);
      expect(report.extra).toEqual([expect.objectContaining({ stream: 'invoice-not-from-the-source', type: 'InvoiceDrafted' })]);
      expect(report.outOfOrder).toEqual([expect.objectContaining({ stream: reorderedIn, index: 0 })]);
      expect(report.mismatched).toEqual([expect.objectContaining({ stream: alteredIn, id: altered.id, reason: 'data differs from the reference mapping' })]);
      const text = formatDestinationReport(report);
      expect(text).toMatch(/^destination check: FAILED/);
      expect(text).toContain(`missing 1, duplicated 1, extra 1, out of order 1 streams, different 1`);
      expect(text).toContain(dropped.id);
    } finally {
      await client.dispose();
      await copy.close();
    }
  });

  it('says so when the map context (assembler, source identity) cannot match the ids', async () => {
    const report = await verifyDestination({ ...options(kurrent.connectionString), sourceIdentity: 'another-source' });
    expect(report.ok).toBe(false);
    expect(report.missing).toHaveLength(report.expectedEvents);
    expect(formatDestinationReport(report)).toContain('hint: not one expected id was found');
  });
});

describe('compareEvents', () => {
  const e = (stream: string, id: string, data: unknown = {}) => ({ stream, id, type: 'T', data });
  it('treats an expected event found in another stream as missing there and extra here', () => {
    const report = compareEvents([e('a', '1')], [e('b', '1')]);
    expect(report.missing).toEqual([{ stream: 'a', id: '1', type: 'T' }]);
    expect(report.extra).toEqual([{ stream: 'b', id: '1', type: 'T' }]);
    expect(report.ok).toBe(false);
  });

  it('compares data whatever the key order', () => {
    expect(compareEvents([e('a', '1', { x: 1, y: [1, { p: 1, q: 2 }] })], [e('a', '1', { y: [1, { q: 2, p: 1 }], x: 1 })]).ok).toBe(true);
  });

  it('reports nothing wrong for two empty sides', () => {
    expect(compareEvents([], [])).toMatchObject({ ok: true, expectedEvents: 0, actualEvents: 0 });
  });
});
