// Ad hoc snapshots through the real CLI: `event-assembler snapshot --config … --tables …` writes a
// request into the WAL; the running assembler reads it from its slot, starts a new generation of
// exactly those tables as an incremental (watermark) snapshot while streaming, and `--wait` follows
// it to the end. A request made while the assembler is down is picked up when it runs, and an
// assembler killed with SIGKILL mid-snapshot resumes it (same generation, every event once).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { findRequestedProgress } from '../../src/pipeline/snapshot-store.js';
import { encodeSnapshotRequest, newSnapshotRequest, SNAPSHOT_REQUEST_PREFIX } from '../../src/source/snapshot/index.js';
import { createPipelineRig, rigEnv, seedBeforeSlot, startCli, writeRigConfig, workload, type PipelineRig } from './pipeline-rig.js';

interface StoredProgress {
  readonly progress: { generation: string; kind: string; request?: { id: string; lsn: string } | null; tables: { table: string; status: string; chunksDone: number; rowsDone: number }[] };
}

function progressEvents(rig: PipelineRig, name: string): StoredProgress[] {
  try {
    return rig.events(`event-assembler.snapshot-${name}`).map((e) => e.data as unknown as StoredProgress);
  } catch {
    return [];
  }
}

function writeConfig(dir: string, rig: PipelineRig, name: string, chunkSize: number): string {
  return writeRigConfig(dir, rig, { name, envPrefix: 'EA_ADHOC', statusIntervalMs: 500, snapshot: `{ mode: 'never', chunkSize: ${chunkSize} }` });
}

function cli(rig: PipelineRig, args: string[]) {
  return startCli(args, rigEnv(rig, 'EA_ADHOC'));
}

const imported = (rig: PipelineRig, stream: string) => rig.events(stream).filter((e) => e.type === 'InvoiceImported').map((e) => e.metadata['snapshot.generation']);

describe('ad hoc snapshots requested with `event-assembler snapshot`', () => {
  let dir: string;
  const rigs: PipelineRig[] = [];
  const assemblers: Assembler[] = [];
  const children: { kill(signal: NodeJS.Signals): boolean; exitCode: number | null }[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ea-adhoc-'));
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    for (const a of assemblers) await a.stop().catch(() => undefined);
    for (const r of rigs) await r.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a running assembler snapshots exactly the requested table as a new generation; --wait follows it to the end', async () => {
    const rig = await createPipelineRig('adhoc_a');
    rigs.push(rig);
    const name = 'adhoc_a';
    const n = 40;
    await seedBeforeSlot(rig, n, 'a');
    const file = writeConfig(dir, rig, name, 8);
    const logger = rig.logger();
    const assembler = createAssembler(rig.config({ name, snapshot: { mode: 'never', chunkSize: 8 } }), { logger });
    assemblers.push(assembler);
    const running = assembler.run();
    running.catch(() => undefined);
    await rig.until(() => expect(assembler.status().state).toBe('running'));
    expect(assembler.status().snapshot).toBeNull();
    const w = workload(rig);
    await w.draft('live1', 'ac1');
    await rig.until(() => expect(rig.events('invoice-live1').map((e) => e.type)).toEqual(['InvoiceDrafted']));
    expect(rig.businessStreams()).toEqual(['invoice-live1']); // mode never: existing rows have no events yet

    // Refused before anything is written: a table the assembler does not capture, a bad name.
    const uncaptured = cli(rig, ['snapshot', '--config', file, '--tables', 'public.nope']);
    children.push(uncaptured.child);
    expect(await uncaptured.exit()).toBe(1);
    expect(uncaptured.stderr()).toContain('[SNAPSHOT_TABLE_NOT_CAPTURED]');
    const badName = cli(rig, ['snapshot', '--config', file, '--tables', 'invoice']);
    children.push(badName.child);
    expect(await badName.exit()).toBe(1);
    expect(badName.stderr()).toContain('[SNAPSHOT_TABLE_NAME_INVALID]');
    const dry = cli(rig, ['snapshot', '--config', file, '--tables', 'public.invoice', '--dry-run']);
    children.push(dry.child);
    expect(await dry.exit(), dry.output()).toBe(0);
    expect(dry.stdout()).toContain(`would request an ad hoc snapshot of public.invoice from assembler "${name}"`);
    expect(dry.stdout()).toContain('it would become generation 1');
    expect(progressEvents(rig, name)).toEqual([]);

    const request = cli(rig, ['snapshot', '--config', file, '--tables', 'public.invoice', '--wait', '--timeout', '60', '--progress-interval', '0.2']);
    children.push(request.child);
    // Streaming goes on during the snapshot.
    await w.issue('ai00003');
    expect(await request.exit(90_000), request.output()).toBe(0);
    expect(request.stdout()).toMatch(/requested an ad hoc snapshot of public\.invoice from assembler "adhoc_a": request [0-9a-f-]{36}, WAL message at [0-9A-F]+\/[0-9A-F]+/);
    expect(request.stdout()).toContain(`ad hoc snapshot generation 1 done: ${n + 1} rows of public.invoice`);
    expect(request.stderr()).toContain('started ad hoc snapshot generation 1 of public.invoice');
    const progressLines = request.lines().filter((l) => l['msg'] === 'snapshot progress');
    expect(progressLines.length).toBeGreaterThan(0);
    expect(progressLines.at(-1)).toMatchObject({ generation: '1', kind: 'ad_hoc', table: 'public.invoice', status: 'done', rowsDone: n + 1 });

    await rig.until(() => expect(assembler.status().snapshot).toMatchObject({ action: 'ad-hoc-snapshot', code: 'SNAPSHOT_REQUESTED', generation: '1', finished: true }));
    const status = assembler.status();
    expect(status.snapshot!.rows).toBe(n + 1); // exactly the invoice table's rows: no customer, line or payment was read
    expect(status.snapshot!.progress).toMatchObject({ kind: 'ad_hoc', generation: '1', tables: [{ table: 'public.invoice', status: 'done', rowsDone: n + 1 }] });
    expect(logger.lines.find((l) => l.message === 'snapshot: ad hoc snapshot started as a new generation')?.fields).toMatchObject({ generation: '1', previousGeneration: null, tables: ['public.invoice'] });

    // Every invoice exactly once in generation 1; events after it land after it.
    const streams = rig.businessStreams().filter((s) => s.startsWith('invoice-'));
    expect(streams).toHaveLength(n + 1);
    for (const stream of streams) expect(imported(rig, stream), stream).toEqual(['1']);
    expect(rig.events('invoice-ai00003').map((e) => e.type)).toContain('InvoiceIssued');
    await w.pay('ai00003', 'apay3');
    await rig.until(() => expect(rig.events('invoice-ai00003').at(-1)?.type).toBe('InvoicePaid'));
    expect(rig.events('invoice-live1').map((e) => e.type)).toEqual(['InvoiceDrafted', 'InvoiceImported']);
    // An ad hoc generation re-states current state on purpose, and says so.
    expect(rig.events('invoice-live1').at(-1)?.metadata).toMatchObject({ origin: 'snapshot', 'snapshot.generation': '1', 'snapshot.kind': 'ad_hoc' });

    // A second request is the next generation.
    const again = cli(rig, ['snapshot', '--config', file, '--tables', 'public.invoice', '--wait', '--timeout', '60']);
    children.push(again.child);
    expect(await again.exit(90_000), again.output()).toBe(0);
    expect(again.stdout()).toContain('ad hoc snapshot generation 2 done');
    for (const stream of streams) expect(imported(rig, stream), stream).toEqual(['1', '2']);

    // Two requests in one transaction: the first starts generation 3, the second queues behind it (generation 4).
    const [r3, r4] = [newSnapshotRequest({ assembler: name, tables: ['public.invoice'] }), newSnapshotRequest({ assembler: name, tables: ['public.invoice'] })];
    await rig.sql(`SELECT pg_logical_emit_message(true, $1, $2), pg_logical_emit_message(true, $1, $3)`, [SNAPSHOT_REQUEST_PREFIX, encodeSnapshotRequest(r3), encodeSnapshotRequest(r4)]);
    await rig.until(() => expect(assembler.status().snapshot).toMatchObject({ generation: '4', finished: true }), 60_000);
    const queued = logger.lines.find((l) => l.message === 'snapshot: ad hoc snapshot request queued behind the running snapshot');
    expect(queued?.fields).toMatchObject({ request: r4.id, running: '3' });
    const requestsByGeneration = new Map(progressEvents(rig, name).map((p) => [p.progress.generation, p.progress.request?.id]));
    expect(requestsByGeneration.get('3')).toBe(r3.id);
    expect(requestsByGeneration.get('4')).toBe(r4.id);
    for (const stream of streams) expect(imported(rig, stream), stream).toEqual(['1', '2', '3', '4']);
    // A follower that looks only now finds generation 3 finished behind generation 4 (what --wait does then).
    expect(await findRequestedProgress(rig.kdb.connectionString, name, r3.id)).toMatchObject({ generation: '3', tables: [{ status: 'done', rowsDone: n + 1 }] });
    await assembler.stop();
    const summary = await running;
    expect(summary.snapshot).toMatchObject({ action: 'ad-hoc-snapshot', generation: '4', finished: true });
  }, 180_000);

  it('a request made while the assembler is down is picked up when it runs; SIGKILL mid-snapshot resumes it (same generation, every event once)', async () => {
    const rig = await createPipelineRig('adhoc_k');
    rigs.push(rig);
    const name = 'adhoc_k';
    const n = 1500;
    await seedBeforeSlot(rig, n, 'k');
    const file = writeConfig(dir, rig, name, 10);
    // The assembler is not running: the request waits in the slot.
    const request = cli(rig, ['snapshot', '--config', file, '--tables', 'public.invoice', '--json']);
    children.push(request.child);
    expect(await request.exit(), request.output()).toBe(0);
    const requested = JSON.parse(request.stdout().trim().split('\n')[0]!) as { request: string; lsn: string };

    const first = cli(rig, ['run', '--config', file]);
    children.push(first.child);
    await rig.until(() => {
      const last = progressEvents(rig, name).at(-1);
      expect(last?.progress.request?.id, first.output()).toBe(requested.request);
      expect(last!.progress.tables[0]!.chunksDone).toBeGreaterThanOrEqual(3);
    }, 60_000);
    first.child.kill('SIGKILL');
    await first.exit();
    const atKill = progressEvents(rig, name).at(-1)!;
    expect(atKill.progress.tables[0]!.status, 'the kill should land mid-snapshot').not.toBe('done');

    const second = cli(rig, ['run', '--config', file]);
    children.push(second.child);
    await rig.until(() => {
      const last = progressEvents(rig, name).at(-1);
      expect(last?.progress.tables.every((t) => t.status === 'done'), second.output()).toBe(true);
    }, 90_000);
    expect(second.lines().find((l) => l['msg'] === 'snapshot: decision')).toMatchObject({ action: 'resume-snapshot', generation: '1', code: 'SNAPSHOT_INTERRUPTED' });
    // The request the slot re-sends (it was never acknowledged past it, or was) does not start a second generation.
    expect(second.lines().some((l) => l['msg'] === 'snapshot: ad hoc snapshot started as a new generation')).toBe(false);
    const w = workload(rig);
    await w.issue('ki00007');
    await rig.until(() => expect(rig.events('invoice-ki00007').map((e) => e.type)).toEqual(['InvoiceImported', 'InvoiceIssued']));
    second.child.kill('SIGTERM');
    expect(await second.exit()).toBe(0);

    const streams = rig.businessStreams();
    expect(streams).toHaveLength(n);
    const wrong = streams.filter((s) => imported(rig, s).join(',') !== '1');
    expect(wrong).toEqual([]);
    expect(progressEvents(rig, name).every((p) => p.progress.generation === '1')).toBe(true);
  }, 180_000);
});
