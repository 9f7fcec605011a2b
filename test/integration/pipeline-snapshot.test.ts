// snapshot.mode 'initial' / 'initial_only' through the running pipeline: rows that exist before
// the assembler's first start become snapshot events (InvoiceImported) at the new slot's exported
// snapshot, then the stream continues from its consistent point — no gap, no overlap, checked
// against a reference slot that has its own exported snapshot. A SIGKILL mid-snapshot resumes
// (same generation) and ends with every expected event exactly once; initial_only exits 0.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { createReferenceSlotWithSnapshot, dropReferenceSlot, verifyDestination } from '../../src/testing/verify-destination.js';
import { receiptFromMetadata } from '../../src/sink/receipt.js';
import { createPipelineRig, rigEnv, startCli, writeRigConfig, TABLES, workload, type PipelineRig } from './pipeline-rig.js';

interface StoredProgress {
  readonly progress: { generation: string; consistentPoint: string; tables: { table: string; status: string; chunksDone: number; rowsDone: number }[] };
  readonly pinned: unknown[];
}

function progressEvents(rig: PipelineRig, name: string): StoredProgress[] {
  try {
    return rig.events(`event-assembler.snapshot-${name}`).map((e) => e.data as unknown as StoredProgress);
  } catch {
    return [];
  }
}

/** The rig makes a slot with `setup`; the initial snapshot wants to create its own (with an exported snapshot). */
async function dropRigSlot(rig: PipelineRig): Promise<void> {
  await rig.sql('SELECT pg_drop_replication_slot($1)', [rig.slots[0]]);
}

/** `n` customers with one invoice each, in a handful of large transactions. */
async function seed(rig: PipelineRig, n: number, prefix: string): Promise<void> {
  await rig.sql(
    `INSERT INTO customer (id, name, email, card_number, country) SELECT '${prefix}c' || g, 'Customer ' || g, g || '@secret.example', NULL, 'NL' FROM generate_series(1, $1::int) g`,
    [n],
  );
  await rig.sql(
    `INSERT INTO invoice (id, customer_id, status, currency, total) SELECT '${prefix}i' || lpad(g::text, 6, '0'), '${prefix}c' || g, 'draft', 'EUR', g FROM generate_series(1, $1::int) g`,
    [n],
  );
}

function cliConfig(dir: string, rig: PipelineRig, name: string, mode: string, chunkSize: number): string {
  return writeRigConfig(dir, rig, { name, file: `${name}-${mode}.config.ts`, envPrefix: 'EA_SNAP', statusIntervalMs: 500, snapshot: `{ mode: '${mode}', chunkSize: ${chunkSize} }` });
}

function runCli(rig: PipelineRig, file: string) {
  return startCli(['run', '--config', file], rigEnv(rig, 'EA_SNAP'));
}

describe("snapshot.mode 'initial' in the running pipeline", () => {
  let rig: PipelineRig;
  let assembler: Assembler | null = null;
  const ref = 'snapref_a';
  beforeAll(async () => {
    rig = await createPipelineRig('snapa', { slots: 1 });
    await dropRigSlot(rig);
  });
  afterAll(async () => {
    await assembler?.stop();
    await dropReferenceSlot(rig.db.connectionConfig(), ref).catch(() => undefined);
    await rig?.close();
  });

  it('turns existing rows into InvoiceImported at the exported snapshot, then streams from the consistent point: no gap, no overlap', async () => {
    const w = workload(rig);
    await w.customer('a1');
    await w.customer('a2');
    await w.draft('ai1', 'a1');
    await w.draft('ai2', 'a1');
    await w.issue('ai2');
    await w.draft('ai3', 'a2');
    await w.issue('ai3');
    await w.pay('ai3', 'ap3');
    // The reference: its own exported snapshot, nothing committed between it and the assembler's slot.
    const reference = await createReferenceSlotWithSnapshot(rig.db.connectionString, ref, { mappers, assembler: 'snapa', generation: '1', tables: TABLES });
    expect(reference.expectedBefore.map((e) => e.type)).toEqual(['InvoiceImported', 'InvoiceImported', 'InvoiceImported']);

    const a = createAssembler(rig.config({ snapshot: { mode: 'initial', chunkSize: 2 } }), { logger: rig.logger() });
    assembler = a;
    const running = a.run();
    running.catch(() => undefined);
    await rig.until(() => expect(a.status().snapshot?.consistentPoint ?? null).not.toBeNull());
    const consistentPoint = a.status().snapshot!.consistentPoint!;
    // Live changes after the slot exists: they come through the stream only.
    await w.issue('ai1');
    await w.void('ai2');
    await w.customer('a3');
    await w.draft('ai4', 'a3');
    await rig.until(() => expect(rig.events('invoice-ai4').map((e) => e.type)).toEqual(['InvoiceDrafted']));
    await rig.until(() => expect(a.status().transactions.inFlight).toBe(0));
    await a.stop();
    const summary = await running;

    expect(rig.events('invoice-ai1').map((e) => e.type)).toEqual(['InvoiceImported', 'InvoiceIssued']);
    expect(rig.events('invoice-ai2').map((e) => e.type)).toEqual(['InvoiceImported', 'InvoiceVoided']);
    expect(rig.events('invoice-ai3').map((e) => e.type)).toEqual(['InvoiceImported']);
    const imported = rig.events('invoice-ai3')[0]!;
    expect(imported.data).toMatchObject({ invoiceId: 'ai3', customerId: 'a2', status: 'paid', currency: 'EUR' });
    expect(imported.metadata).toMatchObject({ origin: 'snapshot', 'snapshot.generation': '1', 'snapshot.kind': 'initial' });
    expect(receiptFromMetadata(imported.metadata)).toMatchObject({ kind: 'snapshot', lsn: consistentPoint, generation: '1' });
    // Customers registered before the slot: no change event is replayed for them (no overlap).
    expect(rig.businessStreams()).not.toContain('customer-a1');
    expect(rig.businessStreams()).toContain('customer-a3');
    expect(summary.snapshot).toMatchObject({ action: 'initial-snapshot', generation: '1', finished: true, consistentPoint, events: 3 });
    expect(summary.snapshot!.rows).toBeGreaterThanOrEqual(2 + 3 + 4 + 1); // customers, invoices, lines, payment

    const report = await verifyDestination({
      source: { connection: rig.captureUrl, slot: ref, publication: rig.publication },
      destination: { connectionString: rig.kdb.connectionString },
      mappers,
      assembler: 'snapa',
      expectedBefore: reference.expectedBefore,
    });
    expect(report, JSON.stringify(report, null, 2)).toMatchObject({ ok: true, missing: [], duplicated: [], extra: [] });
    expect(report.byType['InvoiceImported']).toEqual({ expected: 3, actual: 3 });

    // A restart with the snapshot complete just streams (no second generation, nothing repeated).
    const again = createAssembler(rig.config({ snapshot: { mode: 'initial', chunkSize: 2 } }), { logger: rig.logger() });
    assembler = again;
    const rerun = again.run();
    rerun.catch(() => undefined);
    await rig.until(() => expect(again.status().state).toBe('running'));
    expect(again.status().snapshot?.action).toBe('stream');
    await w.pay('ai1', 'ap1');
    await rig.until(() => expect(rig.events('invoice-ai1').map((e) => e.type)).toEqual(['InvoiceImported', 'InvoiceIssued', 'InvoicePaid']));
    await again.stop();
    await rerun;
    assembler = null;
  });
});

describe('interrupted initial snapshot (SIGKILL via the CLI) and initial_only', () => {
  let dir: string;
  const rigs: PipelineRig[] = [];
  const children: { kill(signal: NodeJS.Signals): boolean; exitCode: number | null }[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ea-snap-'));
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    for (const r of rigs) {
      await dropReferenceSlot(r.db.connectionConfig(), 'snapref_k').catch(() => undefined);
      await r.close();
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('resumes after a SIGKILL mid-snapshot: every expected event exactly once', async () => {
    const rig = await createPipelineRig('snapk', { slots: 1 });
    rigs.push(rig);
    await dropRigSlot(rig);
    const name = 'snapk';
    await seed(rig, 1500, 'k');
    const reference = await createReferenceSlotWithSnapshot(rig.db.connectionString, 'snapref_k', { mappers, assembler: name, generation: '1', tables: TABLES });
    expect(reference.expectedBefore).toHaveLength(1500);

    const first = runCli(rig, cliConfig(dir, rig, name, 'initial', 25));
    children.push(first.child);
    // Kill once at least one chunk of invoices is durable and recorded, while the snapshot is unfinished.
    await rig.until(() => {
      const last = progressEvents(rig, name).at(-1);
      const invoice = last?.progress.tables.find((t) => t.table === 'public.invoice');
      expect(invoice?.chunksDone ?? 0, first.output()).toBeGreaterThanOrEqual(1);
    }, 45_000);
    first.child.kill('SIGKILL');
    await first.exit();
    const atKill = progressEvents(rig, name).at(-1)!;
    const invoiceAtKill = atKill.progress.tables.find((t) => t.table === 'public.invoice')!;
    expect(invoiceAtKill.status, 'the kill should land mid-snapshot').not.toBe('done');
    // Nothing was acknowledged during the snapshot: the slot still starts at its consistent point.
    const slotBefore = await rig.slot(rig.slots[0]!);

    const second = runCli(rig, cliConfig(dir, rig, name, 'initial', 25));
    children.push(second.child);
    await rig.until(() => {
      const last = progressEvents(rig, name).at(-1);
      expect(last?.progress.tables.every((t) => t.status === 'done'), second.output()).toBe(true);
    }, 45_000);
    const decision = second.lines().find((l) => l['msg'] === 'snapshot: decision');
    expect(decision).toMatchObject({ action: 'resume-snapshot', generation: '1', code: 'SNAPSHOT_INTERRUPTED' });
    // A live change after the resumed snapshot is complete.
    const w = workload(rig);
    await w.issue('ki000007');
    await rig.until(() => expect(rig.events('invoice-ki000007').map((e) => e.type)).toEqual(['InvoiceImported', 'InvoiceIssued']));
    second.child.kill('SIGTERM');
    expect(await second.exit()).toBe(0);

    const report = await verifyDestination({
      source: { connection: rig.captureUrl, slot: 'snapref_k', publication: rig.publication },
      destination: { connectionString: rig.kdb.connectionString },
      mappers,
      assembler: name,
      expectedBefore: reference.expectedBefore,
    });
    expect({ ok: report.ok, missing: report.missing.length, duplicated: report.duplicated.length, extra: report.extra.length, mismatched: report.mismatched.length }).toEqual({
      ok: true, missing: 0, duplicated: 0, extra: 0, mismatched: 0,
    });
    expect(report.byType['InvoiceImported']).toEqual({ expected: 1500, actual: 1500 });
    expect(slotBefore.confirmed_flush_lsn).toBe(atKill.progress.consistentPoint);
  }, 90_000);

  it("initial_only: snapshot, then exit 0; a second run finds it done and exits 0 at once", async () => {
    const rig = await createPipelineRig('snapo', { slots: 1 });
    rigs.push(rig);
    await dropRigSlot(rig);
    await seed(rig, 40, 'o');
    const file = cliConfig(dir, rig, 'snapo', 'initial_only', 16);
    const run = runCli(rig, file);
    children.push(run.child);
    expect(await run.exit(45_000), run.output()).toBe(0);
    const stopped = run.lines().find((l) => l['msg'] === 'assembler stopped');
    expect(stopped, run.output()).toMatchObject({ reason: 'snapshot-done', snapshot: { action: 'initial-snapshot', finished: true, events: 40 } });
    expect(rig.businessStreams()).toHaveLength(40);
    expect(rig.events('invoice-oi000001').map((e) => e.type)).toEqual(['InvoiceImported']);
    // Not streamed: the slot is where the snapshot left it (its consistent point), nothing acknowledged.
    const slot = await rig.slot(rig.slots[0]!);
    expect(slot.confirmed_flush_lsn).toBe((stopped!['snapshot'] as { consistentPoint: string }).consistentPoint);

    const again = runCli(rig, file);
    children.push(again.child);
    expect(await again.exit(45_000), again.output()).toBe(0);
    expect(again.lines().find((l) => l['msg'] === 'assembler stopped')).toMatchObject({ reason: 'snapshot-done', snapshot: { action: 'stop' } });
    expect(rig.businessStreams()).toHaveLength(40);
  }, 60_000);
});

describe('initial snapshot, two tables read in parallel in chunks of 5', () => {
  let rig: PipelineRig;
  beforeAll(async () => {
    rig = await createPipelineRig('snapp', { slots: 1 });
    await dropRigSlot(rig);
  });
  afterAll(async () => {
    await rig?.close();
  });

  it('every record was pinned by the last progress record before it (pins go one chunk ahead), and every row is one event', async () => {
    await seed(rig, 240, 'p');
    const a = createAssembler(rig.config({ snapshot: { mode: 'initial', chunkSize: 5, parallelism: 2 } }), { logger: rig.logger() });
    const running = a.run();
    running.catch(() => undefined);
    try {
      await rig.until(() => expect(a.status().snapshot?.finished).toBe(true), 60_000);
      await rig.until(() => expect(a.status().transactions.inFlight).toBe(0));
    } finally {
      await a.stop();
    }
    const summary = await running;
    expect(summary.snapshot).toMatchObject({ finished: true, events: 240 });

    // Each progress record's pins, as `table \0 key` → `lsn/sequence`, in destination order.
    const saves = rig.kdb.readStreamEvents('event-assembler.snapshot-snapp').map((e) => {
      const data = JSON.parse(Buffer.from(e.data).toString('utf8')) as { pinnedRuns?: [string, string, number, string[]][] };
      const pins = new Map<string, string>();
      for (const [table, lsn, first, keys] of data.pinnedRuns ?? []) keys.forEach((key, i) => pins.set(`${table}\u0000${key}`, `${lsn}/${first + i}`));
      return { position: e.position, pins };
    });
    expect(saves.length).toBeGreaterThan(240 / 5);
    const records = rig.businessStreams().flatMap((stream) => rig.kdb.readStreamEvents(stream));
    const snapshotRecords = records.map((e) => ({ position: e.position, receipt: receiptFromMetadata(JSON.parse(Buffer.from(e.metadata).toString('utf8')) as Record<string, string>) }));
    expect(snapshotRecords).toHaveLength(240);
    const unpinned: string[] = [];
    for (const { position, receipt } of snapshotRecords) {
      if (receipt?.kind !== 'snapshot') throw new Error(`not a snapshot receipt: ${JSON.stringify(receipt)}`);
      const before = saves.filter((s) => s.position < position).at(-1);
      const pinned = before?.pins.get(`${receipt.table}\u0000${receipt.key}`);
      if (pinned !== `${receipt.lsn}/${receipt.sequence}`) unpinned.push(`${receipt.table} ${receipt.key} at ${receipt.lsn}/${receipt.sequence}: ${pinned ?? 'not pinned'}`);
    }
    expect(unpinned).toEqual([]);
    // The last record covers everything: no pins left.
    expect(saves.at(-1)!.pins.size).toBe(0);
    expect(new Set(rig.businessStreams().filter((s) => s.startsWith('invoice-'))).size).toBe(240);
  }, 90_000);
});
