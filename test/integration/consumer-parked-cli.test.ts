// `event-assembler project parked` and `project parked replay` as processes: a TypeScript config
// whose Deposited handler refuses the amounts listed in a `faults` table; the `project` command
// parks three events; `parked` lists them (table and --json); `parked replay` exits 2 for an
// unknown projection or id (nothing replayed), 1 while an event stays parked (failed again,
// entity deleted), 0 when every selected event was applied; --help names the exit codes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeTables } from '../../src/consumer/index.js';
import { createConsumerRig, until, type ConsumerRig } from './consumer-rig.js';
import { finished, writeAccountsConfig } from './consumer-cli-rig.js';
import { startCli, type CliProcess } from './pipeline-rig.js';

const tables = storeTables();

/** The accounts projection as a user's config module; its Deposited handler refuses the amounts listed in public.faults. */
function writeConfig(dir: string): string {
  return writeAccountsConfig(dir, {
    options: "onError: 'park', retry: { attempts: 1, initialDelayMs: 1, maxDelayMs: 1 },",
    beforeDeposit: [
      "const fault = await ctx.client.query('SELECT reason FROM public.faults WHERE amount = $1', [event.data.amount]);",
      'if (fault.rows[0]) throw new Error(`refused ${event.data.amount}: ${fault.rows[0].reason}`);',
    ].join('\n      '),
  });
}

describe('event-assembler project parked (CLI)', () => {
  let rig: ConsumerRig;
  let dir: string;
  let config: string;
  let env: Record<string, string>;
  const ids: Record<string, string> = {};

  async function parkedIds(): Promise<string[]> {
    return (await rig.sql<{ event_id: string }>(`SELECT event_id::text FROM ${tables.failedEvents} ORDER BY commit_position`)).map((r) => r.event_id);
  }

  async function run(args: readonly string[]): Promise<{ code: number | null | 'timeout'; cli: CliProcess }> {
    const cli = startCli(['project', ...args], env);
    return { code: await finished(cli), cli };
  }

  beforeAll(async () => {
    rig = await createConsumerRig('parked_cli');
    dir = mkdtempSync(join(tmpdir(), 'ea-parked-'));
    config = writeConfig(dir);
    env = { EA_PROJ_PG: rig.db.connectionString, EA_PROJ_KDB: rig.kdb.connectionString };
    await rig.sql('CREATE TABLE public.faults (amount bigint PRIMARY KEY, reason text NOT NULL)');
    await rig.sql("INSERT INTO public.faults VALUES (13, 'rate table missing'), (66, 'not fixed yet')");
    await rig.write('0/1000', 1, [{ account: 'a', kind: 'deposit', amount: 5 }, { account: 'b', kind: 'deposit', amount: 13 }, { account: 'c', kind: 'deposit', amount: 13 }]);
    await rig.write('0/2000', 2, [{ account: 'c', kind: 'close' }, { account: 'd', kind: 'deposit', amount: 66 }]);
    for (const e of await rig.readAll()) if (e.type === 'Deposited') ids[`${(e.data as { account: string }).account}${(e.data as { amount: number }).amount}`] = e.id;
    // The projection runs until its three failing deposits are parked.
    const cli = startCli(['project', '--config', config], env);
    try {
      await until(async () => expect(await parkedIds()).toHaveLength(3), 30_000);
      await until(() => expect(cli.lines().filter((l) => l['msg'] === 'projection parked an event')).toHaveLength(3));
      cli.child.kill('SIGTERM');
    } finally {
      expect(await finished(cli)).toBe(0);
    }
  });
  afterAll(async () => {
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lists the parked events, as a table and as JSON', async () => {
    const table = await run(['parked', '--config', config]);
    expect(table.code).toBe(0);
    const lines = table.cli.stdout().split('\n');
    expect(lines[0]).toBe('3 parked events');
    expect(lines[2]!.split(/\s{2,}/)).toEqual(['PROJECTION', 'PARTITION', 'EVENT', 'TYPE', 'STREAM@REVISION', 'POSITION', 'ATTEMPTS', 'PARKED AT', 'ERROR']);
    const row = lines.find((l) => l.includes(ids['b13']!))!;
    expect(row.split(/\s+/).slice(0, 5)).toEqual(['accounts', '0/1', ids['b13'], 'Deposited', 'account-b@0']);
    expect(row).toMatch(/ 2 +\d{4}-\d\d-\d\dT[\d:.]+Z +Error: refused 13: rate table missing$/);

    const json = await run(['parked', '--config', config, '--projection', 'accounts', '--json']);
    expect(json.code).toBe(0);
    const { parked } = JSON.parse(json.cli.stdout()) as { parked: Record<string, unknown>[] };
    expect(parked.map((p) => p['eventId'])).toEqual([ids['b13'], ids['c13'], ids['d66']]);
    expect(parked[2]).toMatchObject({ projection: 'accounts', type: 'Deposited', stream: 'account-d', revision: '0', attempts: 2, error: { message: 'refused 66: not fixed yet' }, data: { account: 'd', amount: 66 } });
    expect(parked[2]!['position']).toEqual({ commit: expect.stringMatching(/^\d+$/), prepare: expect.stringMatching(/^\d+$/) });
  });

  it('exits 2 for a projection not in the configuration, a missing --projection or an id that is not parked — replaying nothing', async () => {
    expect((await run(['parked', '--config', config, '--projection', 'nope'])).code).toBe(2);
    const unknown = await run(['parked', 'replay', '--config', config, '--projection', 'nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.cli.lines().find((l) => l['level'] === 'error')).toMatchObject({ msg: 'projection "nope" is not in the configuration', configured: ['accounts'] });
    expect((await run(['parked', 'replay', '--config', config])).code).toBe(2);
    const notParked = await run(['parked', 'replay', '--config', config, '--projection', 'accounts', '--id', ids['b13']!, '--id', ids['a5']!]);
    expect(notParked.code).toBe(2);
    expect(notParked.cli.lines().find((l) => l['level'] === 'error')).toMatchObject({ code: 'PROJECTION_INVALID_OPTIONS', field: 'ids' });
    expect(await parkedIds()).toHaveLength(3);
  });

  it('exits 1 while the fault is there: failed again, kept parked with one more attempt', async () => {
    const { code, cli } = await run(['parked', 'replay', '--config', config, '--projection', 'accounts', '--id', ids['b13']!, '--json']);
    expect(code).toBe(1);
    const result = JSON.parse(cli.stdout()) as { resolved: boolean; totals: Record<string, number>; outcomes: Record<string, unknown>[] };
    expect(result).toMatchObject({ resolved: false, totals: { selected: 1, failed: 1 } });
    expect(result.outcomes).toEqual([expect.objectContaining({ eventId: ids['b13'], outcome: 'failed', attempts: 3, cause: { name: 'Error', message: 'refused 13: rate table missing' }, revision: '0' })]);
    expect(cli.lines().find((l) => l['msg'] === 'parked event failed again; it stays parked')).toMatchObject({ eventId: ids['b13'], attempts: 3 });
    expect(await parkedIds()).toHaveLength(3);
  });

  it('after the fix: applied; exit 1 while the deleted entity\'s event and the unfixed one stay parked', async () => {
    await rig.sql('DELETE FROM public.faults WHERE amount = 13');
    const { code, cli } = await run(['parked', 'replay', '--config', config, '--projection', 'accounts']);
    expect(code).toBe(1);
    const out = cli.stdout().split('\n');
    expect(out.find((l) => l.startsWith(ids['b13']!))?.split(/\s{2,}/)).toEqual([ids['b13'], 'Deposited', 'account-b@0', 'applied']);
    expect(out.find((l) => l.startsWith(ids['c13']!))?.split(/\s{2,}/)).toEqual([ids['c13'], 'Deposited', 'account-c@0', 'entityDeleted', 'its entity was deleted after it']);
    expect(out.find((l) => l.startsWith(ids['d66']!))?.split(/\s{2,}/)).toEqual([ids['d66'], 'Deposited', 'account-d@0', 'failed', 'attempt 3: Error: refused 66: not fixed yet']);
    expect(out).toContain('replayed 3 parked events of accounts: 1 applied, 1 entity deleted (kept parked), 1 failed again (kept parked)');
    expect(await rig.balances()).toEqual({ a: 5, b: 13 });
    expect(await parkedIds()).toEqual([ids['c13'], ids['d66']]);
  });

  it('exits 0 when every selected event is applied', async () => {
    await rig.sql('DELETE FROM public.faults');
    const { code, cli } = await run(['parked', 'replay', '--config', config, '--projection', 'accounts', '--id', ids['d66']!, '--json']);
    expect(code).toBe(0);
    expect(JSON.parse(cli.stdout())).toMatchObject({ projection: 'accounts', key: 'accounts', resolved: true, totals: { selected: 1, applied: 1 } });
    expect(await rig.balances()).toEqual({ a: 5, b: 13, d: 66 });
    const list = await run(['parked', '--config', config, '--json']);
    expect((JSON.parse(list.cli.stdout()) as { parked: { eventId: string }[] }).parked.map((p) => p.eventId)).toEqual([ids['c13']]);
  });

  it('exits 1 when PostgreSQL cannot be reached', async () => {
    const cli = startCli(['project', 'parked', 'replay', '--config', config, '--projection', 'accounts'], { ...env, EA_PROJ_PG: 'postgresql://nobody:pw@127.0.0.1:1/none' });
    expect(await finished(cli)).toBe(1);
    expect(cli.lines().find((l) => l['msg'] === 'could not replay the parked events')).toMatchObject({ projection: 'accounts' });
  });

  it('--help teaches with an example and names the exit codes', async () => {
    const list = await run(['parked', '--help']);
    expect(list.code).toBe(0);
    expect(list.cli.stdout()).toContain('event-assembler project parked --config projection.config.ts');
    const replay = await run(['parked', 'replay', '--help']);
    expect(replay.code).toBe(0);
    const help = replay.cli.stdout();
    expect(help).toContain('event-assembler project parked replay --config projection.config.ts --projection accounts');
    expect(help).toMatch(/^ {2}0 {2}every selected event was applied/m);
    expect(help).toMatch(/^ {2}1 {2}an event is still parked/m);
    expect(help).toMatch(/^ {2}2 {2}the configuration is invalid/m);
  });
});
