// `event-assembler project rebuild / rollback / generations` as processes, on a user's config
// module whose `rebuild.accounts.validate` compares each rebuilt balance with a source table:
// rebuild exits 0 and readers' views point at the new generation; `project` then runs the serving
// generation (its checkpoint advances for events written after the rebuild); a source that
// disagrees fails the rebuild (exit 1, the difference named, the old generation still serving);
// SIGTERM during a rebuild marks it failed and leaves readers alone; rollback serves the previous
// generation again; an unknown projection name, or a `rebuild` entry naming one, exits 2.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listGenerations } from '../../src/consumer/index.js';
import { createConsumerRig, until, type ConsumerRig, type LedgerEntry } from './consumer-rig.js';
import { finished, writeAccountsConfig } from './consumer-cli-rig.js';
import { startCli } from './pipeline-rig.js';

const src = join(process.cwd(), 'src/index.js');
/** A deposit of this amount makes the handler wait for the test's advisory lock of the same number. */
const HELD = 4242;

/** The source database the rebuild's check reads (public.source_balances). */
const BETWEEN = `const source = new pg.Pool({ connectionString: process.env.EA_PROJ_PG, max: 1, allowExitOnIdle: true });`;
/** Each sampled balance of a rebuild checked against public.source_balances. */
const CONFIG = `rebuild: {
    accounts: {
      validate: {
        table: 'accounts',
        sample: 100,
        source: async ({ id }) => (await source.query('SELECT balance::int AS balance FROM public.source_balances WHERE id = $1', [id])).rows[0] ?? null,
        check: (row, src) => (Number(row.balance) === src?.balance ? undefined : \`balance \${row.balance}, source \${src?.balance}\`),
      },
    },
  },`;

/** The accounts projection and, for rebuilds, a check of each sampled balance against public.source_balances. */
function writeConfig(dir: string): string {
  return writeAccountsConfig(dir, {
    imports: "import pg from 'pg';",
    options: 'batchSize: 10,',
    beforeDeposit: `if (event.data.amount === ${HELD}) await ctx.client.query('SELECT pg_advisory_xact_lock(${HELD})');`,
    between: BETWEEN,
    config: CONFIG,
  });
}

describe('event-assembler project rebuild / rollback / generations (CLI)', () => {
  let rig: ConsumerRig;
  let dir: string;
  let config: string;
  let env: Record<string, string>;
  let lsn = 0x1000;
  let xid = 9000;
  let written = 0;

  /** Writes one source transaction's events and keeps public.source_balances as the source database would have it. */
  async function write(entries: LedgerEntry[]): Promise<void> {
    lsn += 0x100;
    written += await rig.write(`0/${lsn.toString(16).toUpperCase()}`, ++xid, entries);
    for (const e of entries) {
      if (e.kind === 'close') await rig.sql('DELETE FROM public.source_balances WHERE id = $1', [e.account]);
      else await rig.sql('INSERT INTO public.source_balances VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET balance = source_balances.balance + EXCLUDED.balance', [e.account, e.amount]);
    }
  }

  async function deposits(count: number, amount: number): Promise<void> {
    for (let i = 0; i < count; i++) await write([{ account: `c${i % 6}`, kind: 'deposit', amount: amount + i }]);
  }

  async function source(): Promise<Record<string, number>> {
    const rows = await rig.sql<{ id: string; balance: string }>('SELECT id, balance::text FROM public.source_balances ORDER BY id');
    return Object.fromEntries(rows.map((r) => [r.id, Number(r.balance)]));
  }

  /** The generation schema the readers' view accounts.accounts selects from. */
  async function readersOn(): Promise<string | undefined> {
    const [view] = await rig.sql<{ definition: string }>("SELECT definition FROM pg_views WHERE schemaname = 'accounts' AND viewname = 'accounts'");
    return /FROM (accounts_g\d+)\.accounts/.exec(view?.definition ?? '')?.[1];
  }

  async function states(): Promise<Record<number, string>> {
    return Object.fromEntries((await listGenerations({ postgres: rig.pool, projection: 'accounts' })).map((g) => [g.generation, g.state]));
  }

  beforeAll(async () => {
    rig = await createConsumerRig('cli_rebuild');
    await rig.sql('CREATE TABLE public.source_balances (id text PRIMARY KEY, balance bigint NOT NULL)');
    mkdirSync(join(process.cwd(), '.tmp'), { recursive: true });
    // Inside the checkout, so that the config module's `import pg from 'pg'` resolves.
    dir = mkdtempSync(join(process.cwd(), '.tmp', 'ea-rebuild-'));
    config = writeConfig(dir);
    env = { EA_PROJ_PG: rig.db.connectionString, EA_PROJ_KDB: rig.kdb.connectionString };
    await deposits(24, 10);
  });
  afterAll(async () => {
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('rebuild exits 0, prints what it switched in, and the readers\' views point at the new generation', async () => {
    const first = startCli(['project', 'rebuild', '--config', config, '--projection', 'accounts'], env);
    expect(await finished(first)).toBe(0);
    expect(first.stdout()).toContain("accounts: generation 1 switched in (readers' views in schema accounts); no generation served before");
    expect(first.stdout()).toContain(`${written} events read, ${written} applied, 0 unhandled, 0 skipped, 0 parked`);
    expect(first.stdout()).toContain('validated: 6 rows for 6 live entities, 6 sampled rows agree with their source');
    expect(first.lines().find((l) => l['msg'] === 'rebuild loaded')).toMatchObject({ projection: 'accounts', generation: 1, read: written });
    expect(await readersOn()).toBe('accounts_g1');

    await deposits(12, 100);
    await write([{ account: 'c5', kind: 'close' }]);
    const second = startCli(['project', 'rebuild', '--config', config, '--projection', 'accounts', '--json', '--progress-every', '0'], env);
    expect(await finished(second)).toBe(0);
    // A progress line after each batch loaded (batchSize 10), events read so far and where.
    const loading = second.lines().filter((l) => l['msg'] === 'rebuild loading');
    expect(loading.map((l) => l['read'])).toEqual([10, 20, 30]);
    expect(loading[0]).toMatchObject({ projection: 'accounts', generation: 2, position: { commit: expect.any(String) } });
    const result = JSON.parse(second.stdout()) as Record<string, unknown>;
    expect(result).toMatchObject({ outcome: 'switched', projection: 'accounts', generation: 2, previous: 1, readerSchema: 'accounts', events: { read: written, parked: 0 }, validation: { entities: 5, rows: 5, sampled: 5 } });
    expect(await readersOn()).toBe('accounts_g2');
    expect(await rig.balances('accounts')).toEqual(await source());
    expect(await states()).toEqual({ 1: 'standby', 2: 'serving' });
  });

  it('project then runs the serving generation: its checkpoint advances for events written after the rebuild', async () => {
    const [before] = await rig.sql<{ commit: string }>("SELECT commit_position::text AS commit FROM event_assembler.projection_checkpoints WHERE projection = 'accounts@g2'");
    const cli = startCli(['project', '--config', config], env);
    try {
      await until(() => expect(cli.lines().find((l) => l['msg'] === 'projection running')).toMatchObject({ projection: 'accounts', generation: 2, schema: 'accounts_g2' }), 30_000);
      await deposits(6, 1000);
      await until(async () => expect(await rig.balances('accounts')).toEqual(await source()), 30_000);
      cli.child.kill('SIGTERM');
    } finally {
      expect(await finished(cli)).toBe(0);
    }
    const [after] = await rig.sql<{ commit: string }>("SELECT commit_position::text AS commit FROM event_assembler.projection_checkpoints WHERE projection = 'accounts@g2'");
    expect(BigInt(after!.commit)).toBeGreaterThan(BigInt(before!.commit));
    expect(await rig.sql("SELECT 1 FROM event_assembler.projection_checkpoints WHERE projection = 'accounts'")).toEqual([]);
  });

  it('a check that disagrees exits 1, names the difference, and the old generation keeps serving', async () => {
    await rig.sql("UPDATE public.source_balances SET balance = balance + 1 WHERE id = 'c3'");
    const balance = (await source())['c3']!;
    try {
      const cli = startCli(['project', 'rebuild', '--config', config, '--projection', 'accounts'], env);
      expect(await finished(cli)).toBe(1);
      expect(cli.stdout()).toContain('accounts: rebuild failed, readers unchanged — generation 2 keeps serving');
      expect(cli.stdout()).toContain('generation 3 not switched in: failed, schema accounts_g3 kept for inspection');
      expect(cli.stdout()).toContain(`failed validation (sample check, entity account/c3): balance ${balance - 1}, source ${balance}`);
    } finally {
      await rig.sql("UPDATE public.source_balances SET balance = balance - 1 WHERE id = 'c3'");
    }
    expect(await readersOn()).toBe('accounts_g2');
    expect(await states()).toEqual({ 1: 'standby', 2: 'serving', 3: 'failed' });
  });

  it('generations shows each generation and what rollback would serve; rollback serves it', async () => {
    const list = startCli(['project', 'generations', '--config', config], env);
    expect(await finished(list)).toBe(0);
    const rows = list.stdout().split('\n').filter((l) => l.startsWith('accounts '));
    expect(rows.map((r) => r.split(/\s+/).slice(0, 4))).toEqual([
      ['accounts', '1', 'standby', '-'],
      ['accounts', '2', 'serving', '1'],
      ['accounts', '3', 'failed', '-'],
    ]);
    expect(rows[2]).toContain('failed validation (sample check, entity account/c3)');
    expect(list.stdout()).toContain('accounts: generation 2 serves; project rollback would serve generation 1');

    const rollback = startCli(['project', 'rollback', '--config', config, '--projection', 'accounts'], env);
    expect(await finished(rollback)).toBe(0);
    expect(rollback.stdout()).toContain('accounts: generation 1 serves again (was 2; 2 kept as standby)');
    expect(await readersOn()).toBe('accounts_g1');
    expect(await states()).toEqual({ 1: 'serving', 2: 'standby', 3: 'failed' });

    const again = startCli(['project', 'rollback', '--config', config, '--projection', 'accounts'], env);
    expect(await finished(again)).toBe(1);
    expect(again.stdout()).toContain('accounts: rollback failed, readers unchanged — projection "accounts" generation 1: serves and no generation served before it');
    expect(await readersOn()).toBe('accounts_g1');
  });

  it('SIGTERM during a rebuild: exit 1, the generation marked failed, readers unchanged', async () => {
    const holder = await rig.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [HELD]);
      await write([{ account: 'c0', kind: 'deposit', amount: HELD }]);
      const cli = startCli(['project', 'rebuild', '--config', config, '--projection', 'accounts'], env);
      try {
        // The rebuild's handler waits for the lock: the rebuild is under way, halfway through loading.
        await until(async () => expect(await rig.sql('SELECT 1 FROM pg_locks WHERE locktype = $1 AND objid = $2 AND NOT granted', ['advisory', HELD])).toHaveLength(1), 30_000);
        cli.child.kill('SIGTERM');
        await until(() => expect(cli.lines().map((l) => l['msg'])).toContain('signal received: stopping gracefully'));
      } finally {
        await holder.query('SELECT pg_advisory_unlock($1)', [HELD]);
      }
      expect(await finished(cli)).toBe(1);
      expect(cli.stdout()).toContain('accounts: rebuild stopped by a signal, readers unchanged — generation 1 keeps serving');
      expect(cli.stdout()).toContain('generation 4 not switched in: failed');
      expect(cli.stdout()).toContain('why: stopped by SIGTERM before readers were switched');
      // Stopped once the load ended: nothing validated, nothing switched.
      expect(cli.lines().map((l) => l['msg'])).not.toContain('rebuild loaded');
    } finally {
      holder.release();
    }
    expect(await readersOn()).toBe('accounts_g1');
    const fourth = (await listGenerations({ postgres: rig.pool, projection: 'accounts' })).find((g) => g.generation === 4);
    expect(fourth).toMatchObject({ state: 'failed', failure: 'stopped by SIGTERM before readers were switched' });
  });

  it('an unknown projection name exits 2, naming the projections there are; so does a bad --to', async () => {
    const clis = [startCli(['project', 'rebuild', '--config', config, '--projection', 'acounts'], env), startCli(['project', 'rollback', '--config', config, '--projection', 'acounts'], env)];
    for (const cli of clis) {
      expect(await finished(cli)).toBe(2);
      expect(cli.lines().find((l) => l['code'] === 'PROJECTION_UNKNOWN')).toMatchObject({ msg: 'no projection "acounts" in the configuration', projections: ['accounts'] });
    }
    const badTo = startCli(['project', 'rebuild', '--config', config, '--projection', 'accounts', '--to', '9180'], env);
    expect(await finished(badTo)).toBe(2);
    expect(badTo.stderr()).toContain('--to must be head or <commit>/<prepare> (a $all position, e.g. 9180/9180), not "9180"');
    expect(await states()).toEqual({ 1: 'serving', 2: 'standby', 3: 'failed', 4: 'failed' });
  });

  it('a rebuild entry naming no configured projection exits 2, naming the field', async () => {
    const bad = join(dir, 'bad.config.ts');
    writeFileSync(
      bad,
      `import { defineProjection, defineProjectionConfig } from '${src}';
const accounts = defineProjection({ name: 'accounts', from: { categories: ['account'] }, handlers: {} });
export default defineProjectionConfig({ postgres: 'env:EA_PROJ_PG', kurrentdb: 'env:EA_PROJ_KDB', projections: [accounts], rebuild: { acounts: { validate: { table: 'accounts' } } } });
`,
    );
    const cli = startCli(['project', 'rebuild', '--config', bad, '--projection', 'accounts'], env);
    expect(await finished(cli)).toBe(2);
    const problems = cli.lines().find((l) => l['code'] === 'CONFIG_INVALID')!['problems'] as { field: string; problem: string; fix: string }[];
    expect(problems).toEqual([{ field: 'rebuild.acounts', problem: 'names no projection of projections (accounts)', fix: 'use the name of a projection listed in projections, or remove rebuild.acounts' }]);
  });

  it('--help of each subcommand teaches with an example and names the exit codes', async () => {
    const helps = ['rebuild', 'rollback', 'generations'].map((sub) => ({ sub, cli: startCli(['project', sub, '--help'], {}) }));
    for (const { sub, cli } of helps) {
      expect(await finished(cli)).toBe(0);
      expect(cli.stdout()).toContain(`$ event-assembler project ${sub} --config projection.config.ts`);
      expect(cli.stdout()).toMatch(/Exit codes:/);
    }
    expect(helps[0]!.cli.stdout()).toMatch(/^ {2}0 {2}switched in/m);
    expect(helps[0]!.cli.stdout()).toMatch(/^ {2}1 {2}not switched in/m);
    expect(helps[0]!.cli.stdout()).toMatch(/^ {2}2 {2}the configuration could not be loaded/m);
    expect(helps[0]!.cli.stdout()).toContain('rebuild: {');
  });
});
