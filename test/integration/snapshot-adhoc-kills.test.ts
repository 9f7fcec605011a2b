// An ad hoc (incremental) snapshot under a concurrent writer, with the assembler killed (SIGKILL)
// at random chunks. Since 2026-12-05 the stream goes on while a chunk lands (transaction-router.ts):
// the transactions after a chunk's high watermark are appended — and the slot may be acknowledged
// past it — before the chunk's progress is saved. A kill in between reads the chunk again at the
// next start; its records that landed must be recognised (pinned positions, event ids), and no
// chunk row may be older than a change the stream already carried.
// Once with `snapshot.readAhead` 0 and once with 1 (the next chunk read while the one before
// lands: chunks must still be saved in their order). EA_ADHOC_KILLS_SEED repeats a run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrng } from '../../examples/invoicing/workload.js';
import { createPipelineRig, rigEnv, seedBeforeSlot, startCli, writeRigConfig, workload, type PipelineRig } from './pipeline-rig.js';

const SEED = Number(process.env.EA_ADHOC_KILLS_SEED ?? Math.floor(Math.random() * 2 ** 31));
const INVOICES = 1_200;
const CHUNK = 20;
const KILLS = 3;

interface StoredProgress {
  readonly progress: { generation: string; tables: { table: string; status: string; chunksDone: number }[] };
}

function progressOf(rig: PipelineRig, name: string): StoredProgress['progress'] | null {
  try {
    return (rig.events(`event-assembler.snapshot-${name}`).at(-1)?.data as unknown as StoredProgress | undefined)?.progress ?? null;
  } catch {
    return null;
  }
}

describe.each([0, 1])('an ad hoc snapshot under a concurrent writer, killed at random chunks (readAhead %i)', (readAhead) => {
  let dir: string;
  let rig: PipelineRig;
  const children: { kill(signal: NodeJS.Signals): boolean; exitCode: number | null }[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ea-adhoc-kills-'));
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every invoice stream holds each event once, and no imported state older than a change before it', async () => {
    console.log(`ad hoc snapshot kills: seed ${SEED} (EA_ADHOC_KILLS_SEED=${SEED} repeats it), ${INVOICES} invoices, chunks of ${CHUNK}, readAhead ${readAhead}, ${KILLS} kills`);
    const random = createPrng(SEED);
    const name = `adhoc_kills${readAhead}`;
    rig = await createPipelineRig(name);
    // Rows from before the slot: only the snapshot carries them (and the writer's changes).
    await seedBeforeSlot(rig, INVOICES, '');
    const file = writeRigConfig(dir, rig, { name, envPrefix: 'EA_AKILL', statusIntervalMs: 500, snapshot: `{ mode: 'never', chunkSize: ${CHUNK}, readAhead: ${readAhead} }` });
    const env = rigEnv(rig, 'EA_AKILL');
    const request = startCli(['snapshot', '--config', file, '--tables', 'public.invoice', '--json'], env);
    children.push(request.child);
    expect(await request.exit(), request.output()).toBe(0);

    // The writer issues invoices in a random order for as long as the snapshot runs, kills included.
    const order = Array.from({ length: INVOICES }, (_, i) => `i${String(i + 1).padStart(5, '0')}`).sort(() => random() - 0.5);
    const issued: string[] = [];
    let writing = true;
    const writer = (async () => {
      const w = workload(rig);
      for (const id of order) {
        if (!writing) break;
        await w.issue(id);
        issued.push(id);
        await new Promise((resolve) => setTimeout(resolve, 15));
      }
    })();

    /**
     * `rig.until`, and on failure the slot's state beside the assembler's output: a start once
     * failed with "requested WAL segment … has already been removed" (CI, 2026-12-06), and whether
     * the slot's restart_lsn still pointed into a kept segment says whose fault that was.
     */
    const until = async (check: () => void, timeoutMs: number): Promise<void> => {
      try {
        await rig.until(check, timeoutMs);
      } catch (error) {
        const slot = await rig.sql(
          `SELECT restart_lsn::text AS restart_lsn, confirmed_flush_lsn::text AS confirmed_flush_lsn, wal_status, pg_walfile_name(restart_lsn) AS restart_file,
                  (SELECT min(name) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$') AS oldest_kept_file
             FROM pg_replication_slots WHERE slot_name = $1`,
          [rig.slots[0]],
        ).catch((e: unknown) => [String(e)]);
        if (error instanceof Error) error.message += `\n--- slot ---\n${JSON.stringify(slot)}`;
        throw error;
      }
    };
    const done = () => progressOf(rig, name)?.tables.every((t) => t.status === 'done') === true;
    const chunks = () => progressOf(rig, name)?.tables.find((t) => t.table === 'public.invoice')?.chunksDone ?? 0;
    let kills = 0;
    let run = startCli(['run', '--config', file], env);
    children.push(run.child);
    while (kills < KILLS) {
      const target = chunks() + 2 + Math.floor(random() * 8);
      await until(() => expect(chunks() >= target || done(), run.output()).toBe(true), 90_000);
      if (done()) break;
      run.child.kill('SIGKILL');
      await run.exit();
      kills += 1;
      run = startCli(['run', '--config', file], env);
      children.push(run.child);
    }
    expect(kills, 'the kills should land mid-snapshot (seed above)').toBeGreaterThanOrEqual(2);
    await until(() => expect(done(), run.output()).toBe(true), 120_000);
    writing = false;
    await writer;
    // Everything the writer committed reaches its stream.
    await rig.until(() => {
      for (const id of issued) expect(rig.events(`invoice-${id}`).filter((e) => e.type === 'InvoiceIssued')).toHaveLength(1);
    }, 60_000);
    run.child.kill('SIGTERM');
    expect(await run.exit()).toBe(0);

    const wasIssued = new Set(issued);
    const problems: string[] = [];
    for (const id of order) {
      const events = rig.events(`invoice-${id}`);
      const ids = events.map((e) => e.id);
      if (new Set(ids).size !== ids.length) problems.push(`${id}: an event id twice`);
      const types = events.map((e) => e.type);
      const imports = events.filter((e) => e.type === 'InvoiceImported');
      const issues = types.filter((t) => t === 'InvoiceIssued').length;
      if (issues !== (wasIssued.has(id) ? 1 : 0)) problems.push(`${id}: ${issues} InvoiceIssued`);
      if (imports.length > 1) problems.push(`${id}: ${imports.length} InvoiceImported`);
      // A row the writer never touched is only in the snapshot; a row changed inside its chunk's window is superseded.
      if (!wasIssued.has(id) && imports.length !== 1) problems.push(`${id}: untouched, ${imports.length} InvoiceImported`);
      const imported = imports[0];
      if (imported) {
        const after = types.indexOf('InvoiceImported') > types.indexOf('InvoiceIssued') && types.includes('InvoiceIssued');
        // An import after the issue must show the issued row; one before it, the draft.
        if ((imported.data['status'] as string) !== (after ? 'issued' : 'draft')) problems.push(`${id}: imported as ${String(imported.data['status'])} with ${types.join(',')}`);
        if (imported.metadata['snapshot.generation'] !== '1') problems.push(`${id}: generation ${imported.metadata['snapshot.generation']}`);
      }
    }
    console.log(`ad hoc snapshot kills: ${kills} kills, ${issued.length} invoices issued meanwhile, ${order.length} streams checked`);
    expect(problems).toEqual([]);
  }, 400_000);
});
