// `event-assembler teardown` as a process, on a real PostgreSQL: without --yes it only prints
// what it would drop; it refuses while an assembler streams from the slot (naming the PID); with
// --yes it drops the slot — gone from pg_replication_slots — and keeps the publication unless
// --drop-publication, which needs the publication's owner (--source).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPipelineRig, rigEnv, startCli, writeRigConfig, type CliProcess, type PipelineRig } from './pipeline-rig.js';

const PREFIX = 'EA_TD';

describe('event-assembler teardown (CLI)', () => {
  let rig: PipelineRig;
  let dir: string;
  let file: string;
  const started: CliProcess[] = [];

  beforeAll(async () => {
    rig = await createPipelineRig('td');
    dir = mkdtempSync(join(tmpdir(), 'ea-teardown-'));
    file = writeRigConfig(dir, rig, { name: 'td', envPrefix: PREFIX, connections: 'env-reference', statusIntervalMs: 500 });
  });
  afterAll(async () => {
    for (const cli of started) if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGKILL');
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function teardown(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const cli = startCli(['teardown', '--config', file, ...args], rigEnv(rig, PREFIX));
    started.push(cli);
    const code = await cli.exit(30_000);
    if (code === 'timeout') throw new Error(`teardown did not exit within 30 s:\n${cli.output()}`);
    return { code, stdout: cli.stdout(), stderr: cli.stderr() };
  }

  const slotRow = async () =>
    (await rig.sql('SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = $1', [rig.slots[0]])) as { active: boolean; active_pid: number | null }[];
  const publicationExists = async () => (await rig.sql('SELECT 1 FROM pg_publication WHERE pubname = $1', [rig.publication])).length === 1;

  it('--help teaches what it drops, what it refuses, --yes and the exit codes', async () => {
    const cli = startCli(['teardown', '--help'], {});
    started.push(cli);
    expect(await cli.exit(30_000)).toBe(0);
    const help = cli.stdout();
    for (const text of ['--yes', '--drop-publication', '--source', 'while the slot is active', 'the leader and its standbys', 'KurrentDB is not touched', 'Exit codes: 0 dropped']) expect(help).toContain(text);
  });

  it('exit 2 when the configuration cannot be loaded', async () => {
    const broken = join(dir, 'broken.config.ts');
    writeFileSync(broken, 'export default {};\n');
    const cli = startCli(['teardown', '--config', broken, '--yes'], rigEnv(rig, PREFIX));
    started.push(cli);
    expect(await cli.exit(30_000)).toBe(2);
    expect(cli.stderr()).toContain('teardown failed [CONFIG_INVALID]');
  });

  it('without --yes: prints what it would drop, drops nothing, exit 1', async () => {
    const { code, stdout } = await teardown();
    expect(code, stdout).toBe(1);
    expect(stdout).toContain(`slot ${rig.slots[0]}: inactive, wal_status reserved, retains`);
    expect(stdout).toContain('— would be dropped');
    expect(stdout).toContain(`publication ${rig.publication}: kept`);
    expect(stdout).toContain('nothing dropped: teardown drops only with --yes');
    expect(await slotRow()).toHaveLength(1);
  });

  it('refuses while an assembler streams from the slot, naming its PID; drops the slot once it stopped, keeps the publication', async () => {
    const run = startCli(['run', '--config', file], rigEnv(rig, PREFIX));
    started.push(run);
    let pid: number | null = null;
    try {
      await rig.until(async () => {
        const [row] = await slotRow();
        expect(row?.active).toBe(true);
        pid = row!.active_pid;
      }, 30_000);
      const refused = await teardown('--yes');
      expect(refused.code, refused.stderr).toBe(1);
      expect(refused.stderr).toContain(`teardown refused [TEARDOWN_SLOT_ACTIVE]: replication slot "${rig.slots[0]}" is active for PID ${pid}`);
      expect(refused.stderr).toContain('stop every process of this assembler');
      expect(await slotRow()).toHaveLength(1);
    } finally {
      run.child.kill('SIGTERM');
    }
    expect(await run.exit(30_000)).toBe(0);

    // The walsender may hold the slot for a moment after the assembler closed its connection.
    await rig.until(async () => expect((await slotRow())[0]?.active).toBe(false));
    const dropped = await teardown('--yes');
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(dropped.stdout).toContain(`slot ${rig.slots[0]}: dropped`);
    expect(dropped.stdout).toContain(`executed: SELECT pg_drop_replication_slot('${rig.slots[0]}');`);
    expect(dropped.stdout).toContain(`publication ${rig.publication}: kept`);
    expect(await slotRow()).toEqual([]);
    expect(await publicationExists()).toBe(true);

    // Idempotent: nothing left to drop is not an error.
    const again = await teardown('--yes');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(`slot ${rig.slots[0]}: does not exist (nothing to drop)`);
  }, 90_000);

  it('--drop-publication: refused for a role that does not own it (nothing dropped); dropped with the owner\'s --source', async () => {
    const slot = rig.slots[0]!;
    await rig.sql(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot]);
    const refused = await teardown('--yes', '--drop-publication');
    expect(refused.code, refused.stdout).toBe(1);
    expect(refused.stderr).toContain('teardown refused [TEARDOWN_NOT_PERMITTED]');
    expect(refused.stderr).toContain(`publication "${rig.publication}"`);
    expect(refused.stderr).toContain('nothing was dropped');
    expect(await slotRow()).toHaveLength(1);
    expect(await publicationExists()).toBe(true);

    const owner = await teardown('--yes', '--drop-publication', '--source', rig.db.connectionString);
    expect(owner.code, owner.stderr).toBe(0);
    expect(owner.stdout).toContain(`publication ${rig.publication}: dropped`);
    expect(await slotRow()).toEqual([]);
    expect(await publicationExists()).toBe(false);
    expect(`${owner.stdout}${owner.stderr}${refused.stdout}${refused.stderr}`).not.toContain(inject('postgres').password);
  }, 60_000);
});
