// `event-assembler status` as a process, next to `event-assembler run` with observability on:
// the running process serves /metrics on the port it logged; after it stopped, `status` shows the
// slot (inactive, in step with the checkpoint record) and the checkpoint from KurrentDB, as a
// table or JSON; exit 1 names an unreachable server, exit 2 an invalid configuration.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OfflineStatus } from '../../src/observability/offline-status.js';
import { scrape } from '../support/prometheus.js';
import { createPipelineRig, rigEnv, startCli, writeRigConfig, workload, type PipelineRig } from './pipeline-rig.js';

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('event-assembler status (CLI)', () => {
  let rig: PipelineRig;
  let dir: string;
  let file: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    rig = await createPipelineRig('stcli', { slots: 1 });
    dir = mkdtempSync(join(tmpdir(), 'ea-status-'));
    file = writeRigConfig(dir, rig, { name: 'stcli', envPrefix: 'EA_ST', connections: 'env-reference', statusIntervalMs: 500, observability: '{ port: 0, heartbeatIntervalMs: 500 }' });
    env = rigEnv(rig, 'EA_ST');
  });
  afterAll(async () => {
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('--help teaches what it shows and its exit codes', async () => {
    const cli = startCli(['status', '--help'], {});
    expect(await cli.exit(30_000)).toBe(0);
    expect(cli.stdout()).toMatch(/retained WAL \(pg_current_wal_lsn\(\) - restart_lsn/);
    expect(cli.stdout()).toMatch(/Exit codes:\n\s+0 {2}shown\n\s+1 {2}PostgreSQL or KurrentDB could not be read/);
  });

  it('shows the slot and the checkpoint a stopped assembler left, as a table and as JSON', async () => {
    const run = startCli(['run', '--config', file], env);
    try {
      let url = '';
      await rig.until(() => {
        const line = run.lines().find((l) => l['msg'] === 'observability: listening');
        expect(line).toBeDefined();
        url = line!['url'] as string;
      }, 30_000);
      const w = workload(rig);
      await w.customer('s1');
      await rig.until(() => expect(rig.events('customer-s1')).toHaveLength(1));
      await rig.until(async () => {
        const m = await scrape(url);
        expect(m.value('event_assembler_transactions_appended_total')).toBe(1);
        expect(m.value('event_assembler_heartbeats_received_total')).toBeGreaterThanOrEqual(1);
        expect(m.value('event_assembler_slot_active')).toBe(1);
      });
      run.child.kill('SIGTERM');
      expect(await run.exit(30_000)).toBe(0);
    } finally {
      if (run.child.exitCode === null) run.child.kill('SIGKILL');
    }

    const json = startCli(['status', '--config', file, '--json'], env);
    expect(await json.exit(60_000)).toBe(0);
    const status = JSON.parse(json.stdout()) as OfflineStatus;
    const slot = await rig.slot(rig.slots[0]!);
    expect(status.slot).toMatchObject({ slot: rig.slots[0], exists: true, active: false, walStatus: 'reserved', confirmedFlushLsn: slot.confirmed_flush_lsn });
    expect(status.slot.retainedWalBytes).toBeGreaterThan(0);
    expect(status.slot.decoding?.totalTxns).toBeGreaterThanOrEqual(2); // the customer and at least one heartbeat
    expect(status.checkpoint).toMatchObject({ stream: 'event-assembler.checkpoint-stcli', endLsn: slot.confirmed_flush_lsn, slotAheadBytes: 0 });
    expect(status.checkpoint.ageSeconds).toBeLessThan(120);
    expect(status.failed).toEqual({ stream: 'event-assembler.failed-stcli', records: 0, lastAt: null });

    const table = startCli(['status', '--config', file], env);
    expect(await table.exit(60_000)).toBe(0);
    expect(table.stdout()).toContain(`slot ${rig.slots[0]}`);
    expect(table.stdout()).toMatch(/active +no: nothing streams it/);
    expect(table.stdout()).toMatch(/wal_status +reserved/);
    expect(table.stdout()).toMatch(/retained WAL +\d/);
    expect(table.stdout()).toContain(`position            ${slot.confirmed_flush_lsn}`);
    expect(table.stdout()).toMatch(/slot vs record +in step/);
  });

  it('exits 1 naming the server it could not read, 2 on an invalid configuration', async () => {
    const port = await closedPort();
    const noKurrent = startCli(['status', '--config', file], { ...env, EA_ST_KURRENTDB_URL: `kurrentdb://127.0.0.1:${port}?tls=false` });
    expect(await noKurrent.exit(60_000)).toBe(1);
    expect(noKurrent.stderr()).toContain(`KurrentDB at 127.0.0.1:${port} could not be read`);

    const noPostgres = startCli(['status', '--config', file], { ...env, EA_ST_CAPTURE_URL: `postgresql://nobody:secret-pw@127.0.0.1:${port}/db` });
    expect(await noPostgres.exit(60_000)).toBe(1);
    expect(noPostgres.stderr()).toContain(`PostgreSQL at 127.0.0.1:${port} could not be read`);
    expect(noPostgres.output()).not.toContain('secret-pw');

    const bad = join(dir, 'bad.config.ts');
    writeFileSync(bad, `export default { name: 'has space' };\n`);
    const invalid = startCli(['status', '--config', bad], env);
    expect(await invalid.exit(60_000)).toBe(2);
    expect(invalid.stderr()).toMatch(/name: must be 1-100 letters/);
  });
});
