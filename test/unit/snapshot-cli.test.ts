// `event-assembler snapshot` (dry run): the plan it prints, and its errors.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { register } from '../../src/cli/commands/snapshot.js';
import { createFileProgressStore, newSnapshotProgress, updateTable } from '../../src/source/snapshot/index.js';

async function run(args: string[]): Promise<{ out: string; err: string; exitCode: number | undefined }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => { out.push(a.join(' ')); });
  const error = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { err.push(a.join(' ')); });
  const program = new Command().exitOverride();
  register(program);
  process.exitCode = undefined;
  try {
    await program.parseAsync(['node', 'event-assembler', 'snapshot', ...args]);
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
  const exitCode = process.exitCode as number | undefined;
  process.exitCode = undefined;
  return { out: out.join('\n'), err: err.join('\n'), exitCode };
}

afterEach(() => { process.exitCode = undefined; });

describe('event-assembler snapshot (dry run)', () => {
  it('plans a new generation of the chosen tables', async () => {
    const { out } = await run(['--tables', 'public.invoice,public.invoice_line', '--last-generation', '2', '--chunk-size', '500']);
    expect(out).toContain('would start snapshot generation 3 (ad_hoc) of public.invoice, public.invoice_line in chunks of 500 rows while streaming');
    expect(out).toContain('nothing was requested');
    const json = await run(['--tables', 'public.invoice', '--json']);
    expect(JSON.parse(json.out)).toMatchObject({ action: 'ad-hoc-snapshot', dryRun: true, chunkSize: 1024, progress: { generation: '1', kind: 'ad_hoc' } });
  });

  it('shows stored progress, and refuses tables that are not captured', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'snapshot-cli-'));
    try {
      const file = path.join(dir, 'p.json');
      await createFileProgressStore(file).save(updateTable(newSnapshotProgress({ generation: '5', kind: 'initial', mode: 'initial', tables: ['public.a'], reason: 'no stored position' }), 'public.a', { status: 'running', rowsDone: 10, estimatedRows: 20 }));
      const { out } = await run(['--tables', 'public.a', '--progress-file', file, '--last-generation', '5']);
      expect(out).toContain('stored snapshot: generation 5 (initial), unfinished: no stored position');
      expect(out).toContain('public.a  [##########----------]  50%  10/20');
      const refused = await run(['--tables', 'public.zzz', '--captured', 'public.a']);
      expect(refused.exitCode).toBe(1);
      expect(refused.err).toContain('[SNAPSHOT_TABLE_NOT_CAPTURED]');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
