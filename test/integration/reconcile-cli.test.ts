// `event-assembler reconcile` as a user runs it: --help, the exit codes for usage errors and for
// a line it cannot reconcile (the assembler not running: the cut is never passed), key ranges
// (only the ranges whose hashes differ are compared entity by entity), and --sample.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import type { ReconcileReport } from '../../src/reconcile/index.js';
import { createPipelineRig, rigEnv, startCli, workload, writeRigConfig, type PipelineRig } from './pipeline-rig.js';

let dir: string;
let rig: PipelineRig;
let assembler: Assembler | null = null;
let running: Promise<unknown> | null = null;
let file: string;

async function cli(args: readonly string[], config = file) {
  const run = startCli(['reconcile', '--config', config, ...args], rigEnv(rig, 'EA_RECLI'));
  const code = await run.exit(120_000);
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ea-reconcile-cli-'));
  rig = await createPipelineRig('reclic');
  file = writeRigConfig(dir, rig, { name: rig.name, envPrefix: 'EA_RECLI', reconcilers: true });
  assembler = createAssembler(rig.config({ name: rig.name }));
  running = assembler.run();
  running.catch(() => undefined);
  await rig.until(() => expect(assembler!.status().state).toBe('running'));
  const w = workload(rig);
  await w.customer('c1');
  for (let i = 1; i <= 12; i++) await w.draft(`i${String(i).padStart(2, '0')}`, 'c1');
}, 120_000);

afterAll(async () => {
  await assembler?.stop().catch(() => undefined);
  await running?.catch(() => undefined);
  await rig?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('event-assembler reconcile', { timeout: 180_000 }, () => {
  it('teaches with --help: the cut, what is reported, the exit codes', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    for (const text of ['temporary replication slot', 'missing', 'deleted but alive', '--sample', '--range-size', 'Exit codes', 'docs/runbook.md']) expect(help.stdout).toContain(text);
  });

  it('exits 2 for a configuration without reconcilers and for --tables naming none', async () => {
    const bare = writeRigConfig(dir, rig, { name: rig.name, envPrefix: 'EA_RECLI', file: 'bare.config.ts' });
    const none = await cli([], bare);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('the configuration defines no reconcilers');
    const unknown = await cli(['--tables', 'public.nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no reconciler is named (or reads table) "public.nope"; defined: public.invoice, public.customer');
    const bad = await cli(['--sample', 'many']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--sample must be a positive whole number');
  });

  it('compares only the key ranges whose hashes differ, and names exactly the entities that do', async () => {
    await rig.sql(`UPDATE invoice SET total = 5 WHERE id IN ('i03', 'i11')`); // the lifecycle mapper makes no event of it
    await rig.sql('ANALYZE invoice'); // the row estimate sizes the ranges
    const run = await cli(['--json', '--range-size', '2', '--tables', 'public.invoice']);
    expect(run.code, run.stderr).toBe(1);
    const report = JSON.parse(run.stdout) as ReconcileReport;
    expect(report.summaries).toEqual([{ reconciler: 'public.invoice', table: 'public.invoice', rows: 12, entities: 12, agreeing: 10, missing: 0, extra: 0, different: 2, deletedButAlive: 0 }]);
    expect(report.different.map((d) => [d.stream, d.fields])).toEqual([
      ['invoice-i03', [{ field: 'total', expected: '5.00', actual: '0.00' }]],
      ['invoice-i11', [{ field: 'total', expected: '5.00', actual: '0.00' }]],
    ]);
    expect(report.ranges.total).toBeGreaterThan(2); // the estimate: 12 rows (after ANALYZE) in ranges of 2
    expect(report.ranges.differing).toBeGreaterThanOrEqual(1);
    expect(report.ranges.differing).toBeLessThanOrEqual(2);
  });

  it('--sample checks about N random rows per table', async () => {
    await rig.sql(`UPDATE invoice SET total = 7`);
    // With the table's row count known (as autovacuum makes it), a small table's sample is drawn
    // exactly: BERNOULLI at 1.5 × the share once returned 2 rows of 4 here.
    await rig.sql(`ANALYZE invoice`);
    const run = await cli(['--json', '--sample', '4', '--tables', 'public.invoice']);
    expect(run.code, run.stderr).toBe(1);
    const report = JSON.parse(run.stdout) as ReconcileReport;
    expect(report.sample).toBe(4);
    expect(report.summaries[0]).toMatchObject({ rows: 4, different: 4, agreeing: 0 });
    expect(new Set(report.different.map((d) => d.stream)).size).toBe(4);
  });

  it('exits 3 and says where the checkpoint stands when the assembler does not pass the cut', async () => {
    await assembler!.stop();
    await running;
    assembler = null;
    const run = await cli(['--wait-timeout', '1']);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/reconcile: the assembler "reclic" has not made the destination durable up to the cut [0-9A-F]+\/[0-9A-F]+ within 1 s \(its checkpoint stream event-assembler\.checkpoint-reclic is at [0-9A-F]+\/[0-9A-F]+\)/);
    expect(await rig.sql(`SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'ea_reconcile_%'`)).toEqual([]); // the temporary slot is gone
  });
});
