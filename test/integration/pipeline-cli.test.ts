// `event-assembler run` as a process: a TypeScript config with secrets from environment
// variables; SIGTERM stops it gracefully — drained, acknowledged, exit code 0 — and no log line
// shows a password.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPipelineRig, rigEnv, startCli, writeRigConfig, workload, type PipelineRig } from './pipeline-rig.js';

describe('event-assembler run (CLI)', () => {
  let rig: PipelineRig;
  let dir: string;
  beforeAll(async () => {
    rig = await createPipelineRig('cli', { slots: 1 });
    dir = mkdtempSync(join(tmpdir(), 'ea-run-'));
  });
  afterAll(async () => {
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs from a TypeScript config and stops gracefully on SIGTERM with exit code 0', async () => {
    const file = writeRigConfig(dir, rig, { name: 'cli', file: 'assembler.config.ts', envPrefix: 'EA_CLI', connections: 'env-reference', statusIntervalMs: 500 });
    const { child, exit, lines, output } = startCli(['run', '--config', file], rigEnv(rig, 'EA_CLI'));
    try {
      await rig.until(() => expect(lines().map((l) => l['msg'])).toContain('assembler started'), 30_000);
      const w = workload(rig);
      await w.customer('k1');
      await w.draft('ki1', 'k1');
      await rig.until(() => expect(rig.events('invoice-ki1').map((e) => e.type)).toEqual(['InvoiceDrafted']));
      child.kill('SIGTERM');
      const code = await exit(30_000);
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    const messages = lines().map((l) => l['msg']);
    expect(messages).toContain('signal received: stopping gracefully');
    const stopped = lines().find((l) => l['msg'] === 'assembler stopped')!;
    expect(stopped).toMatchObject({ transactions: { received: 2, appended: 2 }, events: { appended: 2 } });
    expect((await rig.slot(rig.slots[0]!)).confirmed_flush_lsn).toBe(stopped['acknowledgedLsn']);
    expect(lines().find((l) => l['msg'] === 'assembler started')).toMatchObject({ mode: 'multi-stream', concurrentAppends: 4 });
    expect(output()).not.toContain(inject('postgres').password);
  });
});
