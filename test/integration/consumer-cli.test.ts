// `event-assembler project` as a process: a TypeScript config with secrets from environment
// variables runs the accounts projection (balances by increments, one event parked); SIGTERM
// stops it with exit 0 and a summary line; `project status` shows position, head, lag and parked
// (table and --json); an unreachable PostgreSQL exits 1; a second instance exits 1 or, with
// --standby, waits and takes over; an invalid config exits 2 naming every bad field; --help names the exit codes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createConsumerRig, until, type ConsumerRig } from './consumer-rig.js';
import { finished, writeAccountsConfig } from './consumer-cli-rig.js';
import { startCli, type CliProcess } from './pipeline-rig.js';

const src = join(process.cwd(), 'src/index.js');

/** The accounts projection of consumer-rig.ts as a user's config module; a deposit of 13 fails and is parked. */
function writeConfig(dir: string): string {
  return writeAccountsConfig(dir, {
    options: "batchSize: 10, onError: 'park', retry: { attempts: 1, initialDelayMs: 1, maxDelayMs: 1 },",
    beforeDeposit: "if (event.data.amount === 13) throw new Error('unlucky amount');",
  });
}

describe('event-assembler project (CLI)', () => {
  let rig: ConsumerRig;
  let dir: string;
  let config: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    rig = await createConsumerRig('cli');
    dir = mkdtempSync(join(tmpdir(), 'ea-project-'));
    config = writeConfig(dir);
    env = { EA_PROJ_PG: rig.db.connectionString, EA_PROJ_KDB: rig.kdb.connectionString };
  });
  afterAll(async () => {
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('applies events until SIGTERM, then exits 0 with a summary line', async () => {
    await rig.write('0/1000', 1, [{ account: 'a', kind: 'deposit', amount: 5 }, { account: 'b', kind: 'deposit', amount: 7 }]);
    const cli = startCli(['project', '--config', config], env);
    try {
      await until(() => expect(cli.lines().map((l) => l['msg'])).toContain('projection running'), 30_000);
      await rig.write('0/2000', 2, [{ account: 'a', kind: 'deposit', amount: 10 }, { account: 'b', kind: 'deposit', amount: 13 }]);
      await rig.write('0/3000', 3, [{ account: 'c', kind: 'deposit', amount: 1 }]);
      await until(async () => expect(await rig.balances()).toEqual({ a: 15, b: 7, c: 1 }), 30_000);
      await until(() => expect(cli.lines().map((l) => l['msg'])).toContain('projection parked an event'));
      cli.child.kill('SIGTERM');
    } finally {
      expect(await finished(cli)).toBe(0);
    }
    const messages = cli.lines().map((l) => l['msg']);
    expect(messages).toContain('signal received: stopping gracefully');
    const summary = cli.lines().find((l) => l['msg'] === 'projections stopped')!;
    expect(summary).toMatchObject({ exitCode: 0, projections: [{ projection: 'accounts', partition: '0/1', state: 'stopped', applied: 4, parked: 1 }] });
    expect(cli.output()).not.toContain(inject('postgres').password);
  });

  it('status shows position, head, lag and parked, as a table and as JSON', async () => {
    const [checkpoint] = await rig.sql<{ commit_position: string; prepare_position: string }>(
      "SELECT commit_position::text, prepare_position::text FROM event_assembler.projection_checkpoints WHERE projection = 'accounts'",
    );
    expect(checkpoint).toBeDefined();
    // Two events the stopped projection has not seen yet.
    await rig.write('0/4000', 4, [{ account: 'a', kind: 'deposit', amount: 1 }, { account: 'd', kind: 'deposit', amount: 2 }]);

    const table = startCli(['project', 'status', '--config', config], env);
    expect(await finished(table)).toBe(0);
    const position = `${checkpoint!.commit_position}/${checkpoint!.prepare_position}`;
    const row = table.stdout().split('\n').find((l) => l.startsWith('accounts'));
    expect(row?.split(/\s+/).slice(0, 5)).toEqual(['accounts', '0/1', position, '2', '1']);
    expect(table.stdout()).toMatch(/^head of \$all: \d+\/\d+$/m);

    const json = startCli(['project', 'status', '--config', config, '--json'], env);
    expect(await finished(json)).toBe(0);
    const report = JSON.parse(json.stdout()) as { head: { commit: string }; partitions: Record<string, unknown>[] };
    expect(report.partitions).toEqual([
      expect.objectContaining({ projection: 'accounts', partition: '0/1', position: { commit: checkpoint!.commit_position, prepare: checkpoint!.prepare_position }, lag: 2, lagCapped: false, parked: 1 }),
    ]);
    expect(BigInt(report.head.commit)).toBeGreaterThan(BigInt(checkpoint!.commit_position));
  });

  it('exits 1 when PostgreSQL cannot be reached, naming the projection', async () => {
    const cli = startCli(['project', '--config', config], { ...env, EA_PROJ_PG: 'postgresql://nobody:pw@127.0.0.1:1/none' });
    expect(await finished(cli)).toBe(1);
    expect(cli.lines().find((l) => l['msg'] === 'projection failed')).toMatchObject({ projection: 'accounts', partition: '0/1' });
    expect(cli.lines().find((l) => l['msg'] === 'projections stopped')).toMatchObject({ exitCode: 1, projections: [{ state: 'failed' }] });
  });

  it('an invalid config exits 2 and names every bad field', async () => {
    const bad = join(dir, 'bad.config.ts');
    writeFileSync(
      bad,
      `import { defineProjectionConfig } from '${src}';
export default defineProjectionConfig({ postgres: 'env:EA_PROJ_UNSET', kurrentdb: 42 as unknown as string, projections: [], schema: 'not-an-identifier' });
`,
    );
    const cli = startCli(['project', '--config', bad], {});
    expect(await finished(cli)).toBe(2);
    const line = cli.lines().find((l) => l['code'] === 'CONFIG_INVALID')!;
    const problems = line['problems'] as { field: string; problem: string; fix: string }[];
    expect(problems.map((p) => p.field).sort()).toEqual(['kurrentdb', 'postgres', 'projections', 'schema']);
    expect(problems.find((p) => p.field === 'postgres')!.problem).toContain('EA_PROJ_UNSET is not set');
    for (const p of problems) expect(p.fix).not.toBe('');
  });

  it('--help teaches with an example and names the exit codes', async () => {
    const cli = startCli(['project', '--help'], {});
    expect(await finished(cli)).toBe(0);
    const help = cli.stdout();
    expect(help).toContain('defineProjectionConfig({');
    expect(help).toContain('event-assembler project status --config projection.config.ts');
    expect(help).toMatch(/^ {2}0 {2}stopped/m);
    expect(help).toMatch(/^ {2}1 {2}fatal/m);
    expect(help).toMatch(/^ {2}2 {2}the configuration could not be loaded or is invalid/m);
  });
  it('a second instance exits 1 naming the active one; with --standby it waits and takes over when the active one stops', async () => {
    const active = startCli(['project', '--config', config], env);
    let standby: CliProcess | null = null;
    try {
      await until(() => expect(active.lines().map((l) => l['msg'])).toContain('projection running'), 30_000);
      const second = startCli(['project', '--config', config], env);
      expect(await finished(second)).toBe(1);
      const refused = second.lines().find((l) => l['msg'] === 'projection failed')!;
      expect(refused['error']).toMatchObject({ code: 'PROJECTION_CONFLICT' });
      expect(JSON.stringify(refused['error'])).toMatch(/PostgreSQL backend \d+/);

      standby = startCli(['project', '--config', config, '--standby'], env);
      await until(() => expect(standby!.lines().map((l) => l['msg'])).toContain('projection standing by: another instance is active on this partition'), 30_000);
      active.child.kill('SIGTERM');
      expect(await finished(active)).toBe(0);
      await until(() => expect(standby!.lines().map((l) => l['msg'])).toContain('projection taking over: the active instance is gone'), 30_000);
      const before = await rig.balances();
      await rig.write('0/9000', 9, [{ account: 'sb', kind: 'deposit', amount: 3 }]);
      await until(async () => expect(await rig.balances()).toEqual({ ...before, sb: 3 }), 30_000);
      standby.child.kill('SIGTERM');
      expect(await finished(standby)).toBe(0);
    } finally {
      if (active.child.exitCode === null) active.child.kill('SIGKILL');
      if (standby && standby.child.exitCode === null) standby.child.kill('SIGKILL');
    }
  });
});
