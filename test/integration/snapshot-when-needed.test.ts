// snapshot.mode 'when_needed' through the running pipeline: when the stored position can no
// longer be served — the slot was dropped, advanced past the recorded checkpoint, or an
// interrupted snapshot lost its slot — the assembler starts snapshot generation n+1 with a new
// slot (warning logged, summary says `new-generation`), its InvoiceImported events land after the
// old generation's events in the same streams (receipts order them by LSN), and streaming goes on
// from the new slot. Mode 'initial' refuses the same situations with REBUILD_NEEDED (CLI exit code 3).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createAssembler, type Assembler, type RunSummary } from '../../src/pipeline/index.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/testing/postgres.js';
import { createPipelineRig, rigEnv, startCli, writeRigConfig, workload, type PipelineRig } from './pipeline-rig.js';

const rigs: PipelineRig[] = [];
const servers: EmbeddedPostgres[] = [];
const running: Assembler[] = [];

const dir = mkdtempSync(join(tmpdir(), 'ea-when-needed-'));

afterAll(async () => {
  for (const a of running) await a.stop().catch(() => undefined);
  for (const r of rigs) await r.close();
  for (const s of servers) await s.destroy();
  rmSync(dir, { recursive: true, force: true });
});

/** `event-assembler run` in mode 'initial' for the rig: its exit code (3: rebuild needed). */
async function cliRunInitial(rig: PipelineRig): Promise<{ code: number | null; output: string }> {
  const file = writeRigConfig(dir, rig, { name: rig.name, envPrefix: 'EA_WN', snapshot: "{ mode: 'initial' }" });
  const cli = startCli(['run', '--config', file], rigEnv(rig, 'EA_WN'));
  const code = await cli.exit(60_000);
  if (code === 'timeout') cli.child.kill('SIGKILL');
  return { code: code === 'timeout' ? null : code, output: cli.output() };
}

function start(rig: PipelineRig, mode: 'initial' | 'when_needed', chunkSize = 16) {
  const logger = rig.logger();
  const assembler = createAssembler(rig.config({ snapshot: { mode, chunkSize } }), { logger });
  running.push(assembler);
  const result = assembler.run();
  result.catch(() => undefined);
  return { assembler, result, logger };
}

async function dropSlot(rig: PipelineRig): Promise<void> {
  // The slot may still be marked active for a moment after the assembler closed its connection.
  await rig.until(async () => {
    await rig.sql('SELECT pg_drop_replication_slot($1)', [rig.slots[0]]);
  });
}

const generations = (rig: PipelineRig, stream: string) => rig.events(stream).map((e) => `${e.type}${e.metadata['snapshot.generation'] ? `@${e.metadata['snapshot.generation']}` : ''}`);

/** First life of the assembler in mode when_needed: generation 1 of the rows seeded before, then one streamed change; stopped gracefully (position recorded). */
async function firstLife(rig: PipelineRig): Promise<void> {
  const w = workload(rig);
  await w.customer('c1');
  await w.draft('i1', 'c1');
  await w.issue('i1');
  const first = start(rig, 'when_needed');
  await rig.until(() => expect(first.assembler.status().snapshot).toMatchObject({ finished: true }));
  await w.draft('i2', 'c1');
  await rig.until(() => expect(generations(rig, 'invoice-i2')).toEqual(['InvoiceDrafted']));
  await rig.until(() => expect(first.assembler.status().transactions.inFlight).toBe(0));
  await first.assembler.stop();
  const summary = await first.result;
  expect(summary.snapshot).toMatchObject({ action: 'initial-snapshot', generation: '1', finished: true });
  expect(generations(rig, 'invoice-i1')).toEqual(['InvoiceImported@1']);
}

/** The slot can no longer serve the stored position: 'initial' refuses, 'when_needed' starts generation 2 and streams on. */
async function refuseThenNewGeneration(rig: PipelineRig, code: string): Promise<RunSummary> {
  const w = workload(rig);
  const refused = start(rig, 'initial');
  await expect(refused.result).rejects.toMatchObject({ code: 'REBUILD_NEEDED' });
  expect(refused.assembler.status().state).toBe('failed');

  const next = start(rig, 'when_needed');
  await rig.until(() => expect(next.assembler.status()).toMatchObject({ state: 'running', snapshot: { action: 'new-generation', generation: '2', code, finished: true } }), 30_000);
  const warning = next.logger.lines.find((l) => l.level === 'warn' && l.message.startsWith('snapshot: the stored position cannot be served'));
  expect(warning?.fields).toMatchObject({ previousGeneration: '1', generation: '2', code });
  expect(String(warning?.fields?.['reason'])).toContain("mode 'when_needed' starts snapshot generation 2");
  // Stopped right after the new generation, before anything streamed: the restart streams from
  // the new slot (its consistent point is recorded), it does not take it for an unservable slot.
  await next.assembler.stop();
  await next.result;
  const again = start(rig, 'when_needed');
  await rig.until(() => expect(again.assembler.status()).toMatchObject({ state: 'running', snapshot: { action: 'stream' } }));
  // Streaming from the new slot: a later transaction lands after generation 2's events.
  await w.void('i2');
  await rig.until(() => expect(generations(rig, 'invoice-i2')).toEqual(['InvoiceDrafted', 'InvoiceImported@2', 'InvoiceVoided']));
  await rig.until(() => expect(again.assembler.status().transactions.inFlight).toBe(0));
  await again.assembler.stop();
  await again.result;
  return next.result;
}

describe("snapshot.mode 'when_needed'", () => {
  it('slot dropped while the assembler was down → generation 2 of every invoice, then streaming (initial refuses)', async () => {
    const rig = await createPipelineRig('wn_drop');
    rigs.push(rig);
    await firstLife(rig);
    await dropSlot(rig);
    // Changed while no slot existed: only a new snapshot can bring it.
    await workload(rig).pay('i1', 'p1');
    const summary = await refuseThenNewGeneration(rig, 'SLOT_MISSING');
    expect(summary.snapshot).toMatchObject({ action: 'new-generation', generation: '2', code: 'SLOT_MISSING', finished: true, events: 2 });
    expect(summary.snapshot!.reason).toContain('no longer exists');
    expect(generations(rig, 'invoice-i1')).toEqual(['InvoiceImported@1', 'InvoiceImported@2']);
    expect(rig.events('invoice-i1')[1]!.data).toMatchObject({ invoiceId: 'i1', status: 'paid' });
    // The payment made while the slot was gone is not in the stream (no slot saw it), only in the snapshot.
    expect(rig.businessStreams()).not.toContain('payment-p1');
  }, 90_000);

  it('slot advanced past the recorded checkpoint (pg_replication_slot_advance) → generation 2 (initial refuses)', async () => {
    const rig = await createPipelineRig('wn_adv');
    rigs.push(rig);
    await firstLife(rig);
    await workload(rig).pay('i1', 'p1');
    await rig.sql('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [rig.slots[0]]);
    const summary = await refuseThenNewGeneration(rig, 'POSITION_BEHIND_SLOT');
    expect(summary.snapshot!.reason).toContain('past the stored position');
    expect(generations(rig, 'invoice-i1')).toEqual(['InvoiceImported@1', 'InvoiceImported@2']);
    expect(rig.events('invoice-i1')[1]!.data).toMatchObject({ status: 'paid' });
  }, 90_000);

  it("slot invalidated (wal_status 'lost', own server with max_slot_wal_keep_size = 1MB) → generation 2 (initial refuses)", async () => {
    const server = await startEmbeddedPostgres();
    servers.push(server);
    const rig = await createPipelineRig('wn_lost', { server });
    rigs.push(rig);
    await firstLife(rig);
    await workload(rig).pay('i1', 'p1');
    await rig.sql('CREATE TABLE filler (id int, pad text)');
    await server.setParameters({ max_slot_wal_keep_size: '1MB' });
    await rig.until(async () => {
      await rig.sql(`INSERT INTO filler SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g`);
      await rig.sql('SELECT pg_switch_wal()');
      await rig.sql('CHECKPOINT');
      const [row] = (await rig.sql('SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1', [rig.slots[0]])) as { wal_status: string }[];
      expect(row?.wal_status).toBe('lost');
    }, 60_000);
    // The new slot must not be invalidated in turn.
    await server.setParameters({ max_slot_wal_keep_size: -1 });
    const summary = await refuseThenNewGeneration(rig, 'SLOT_LOST');
    expect(summary.snapshot!.reason).toContain("wal_status = 'lost'");
    expect(generations(rig, 'invoice-i1')).toEqual(['InvoiceImported@1', 'InvoiceImported@2']);
    expect(rig.events('invoice-i1')[1]!.data).toMatchObject({ status: 'paid' });
  }, 120_000);

  it('interrupted initial snapshot whose slot was dropped → generation 2, every invoice exactly once in it (initial refuses)', async () => {
    const rig = await createPipelineRig('wn_int');
    rigs.push(rig);
    const n = 600;
    await rig.sql(`INSERT INTO customer (id, name, email, card_number, country) SELECT 'c' || g, 'Customer ' || g, g || '@secret.example', NULL, 'NL' FROM generate_series(1, $1::int) g`, [n]);
    await rig.sql(`INSERT INTO invoice (id, customer_id, status, currency, total) SELECT 'i' || lpad(g::text, 4, '0'), 'c' || g, 'draft', 'EUR', g FROM generate_series(1, $1::int) g`, [n]);
    const first = start(rig, 'initial', 8);
    // Stop (gracefully) once some invoices are durable and the snapshot is still unfinished.
    await rig.until(() => expect(first.assembler.status().snapshot?.events ?? 0).toBeGreaterThanOrEqual(8), 30_000);
    await first.assembler.stop();
    const interrupted = await first.result;
    expect(interrupted.snapshot).toMatchObject({ action: 'initial-snapshot', generation: '1', finished: false });
    const importedBefore = rig.businessStreams().length;
    expect(importedBefore).toBeLessThan(n);
    await dropSlot(rig);

    const refused = start(rig, 'initial');
    await expect(refused.result).rejects.toMatchObject({ code: 'REBUILD_NEEDED', details: { code: 'SNAPSHOT_INTERRUPTED_SLOT_GONE' } });
    // The same through the CLI: exit code 3 (rebuild needed).
    const cli = await cliRunInitial(rig);
    expect(cli.code, cli.output).toBe(3);
    expect(cli.output).toContain('REBUILD_NEEDED');

    const next = start(rig, 'when_needed', 64);
    await rig.until(() => expect(next.assembler.status()).toMatchObject({ state: 'running', snapshot: { action: 'new-generation', generation: '2', code: 'SNAPSHOT_INTERRUPTED_SLOT_GONE', finished: true } }), 45_000);
    await workload(rig).issue('i0001');
    await rig.until(() => expect(generations(rig, 'invoice-i0001')).toEqual(['InvoiceImported@1', 'InvoiceImported@2', 'InvoiceIssued']));
    await next.assembler.stop();
    const summary = await next.result;
    expect(summary.snapshot).toMatchObject({ generation: '2', events: n });
    const streams = rig.businessStreams();
    expect(streams).toHaveLength(n);
    for (const stream of streams) {
      const g2 = generations(rig, stream).filter((t) => t === 'InvoiceImported@2');
      expect(g2, stream).toHaveLength(1);
    }
  }, 120_000);
});
