// The README's "Capture your own table" works as written: its table, contract and configuration
// are taken from the README itself, its `setup` and `run` commands run through the CLI with only
// the connection strings swapped for a test database and the in-memory KurrentDB, and an insert
// into the table comes out as the event the README promises. Edit the README and this test
// follows it (or fails).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { dropRole } from '../support/roles.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Fence {
  readonly lang: string;
  readonly code: string;
  /** The file the README says to save it as: the `path` ending the line before the fence. */
  readonly file: string | null;
}

/** The fenced blocks of the README section `### <heading>`, in order. */
function section(heading: string): Fence[] {
  const lines = readFileSync(path.join(root, 'README.md'), 'utf8').split('\n');
  const start = lines.findIndex((l) => l.trim() === `### ${heading}`);
  if (start < 0) throw new Error(`README.md has no "### ${heading}" section`);
  const fences: Fence[] = [];
  for (let i = start + 1; i < lines.length && !/^#{1,3} /.test(lines[i]!); i++) {
    if (!lines[i]!.startsWith('```')) continue;
    const lang = lines[i]!.slice(3).trim();
    const before = lines.slice(start, i).reverse().find((l) => l.trim() !== '') ?? '';
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    fences.push({ lang, code: lines.slice(i + 1, end).join('\n'), file: /`([^`]+)`:\s*$/.exec(before)?.[1] ?? null });
    i = end;
  }
  return fences;
}

/** The README's shell lines as commands: continuations joined, comments dropped. */
function shellCommands(script: string): string[] {
  return script
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

/** Splits one command line into words as a shell would: quotes removed, quoted spaces kept (no expansions). */
function words(line: string): string[] {
  const out: string[] = [];
  let word: string | null = null;
  let quote: string | null = null;
  for (const ch of line) {
    if (quote !== null) {
      if (ch === quote) quote = null;
      else word += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      word ??= '';
    } else if (/\s/.test(ch)) {
      if (word !== null) out.push(word);
      word = null;
    } else {
      word = (word ?? '') + ch;
    }
  }
  if (word !== null) out.push(word);
  return out;
}

describe('README quick start: capture your own table', () => {
  const fences = section('Capture your own table');
  const dir = path.join(root, '.tmp', `quick-start-${process.pid}`);
  let db: TestDatabase;
  let kdb: InMemoryKurrentDB;
  /** The README's connection strings → this test's. */
  let connections: Map<string, string>;
  const role = 'shop_capture';

  beforeAll(async () => {
    const server = inject('postgres');
    db = await createTestDatabase(server, 'quick_start');
    kdb = await startInMemoryKurrentDB();
    const url = (user: string, password: string) => `postgres://${user}:${encodeURIComponent(password)}@${server.host}:${server.port}/${db.database}`;
    connections = new Map([
      ['postgres://postgres:postgres@localhost:5432/postgres', url(server.superuser, server.password)],
      ['postgres://shop_capture:secret@localhost:5432/postgres', url(role, 'secret')],
      ['kurrentdb://localhost:2113?tls=false', kdb.connectionString],
    ]);
    // The project directory a newcomer would have, with `event-assembler` installed: here a
    // package that re-exports this checkout's sources.
    const pkg = path.join(dir, 'node_modules', 'event-assembler');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
    writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'event-assembler', type: 'module', exports: { '.': './index.ts' } }));
    writeFileSync(path.join(pkg, 'index.ts'), `export * from ${JSON.stringify(path.join(root, 'src', 'index.ts'))};\n`);
  });

  afterAll(async () => {
    await kdb?.close().catch(() => undefined);
    await db?.drop().catch(() => undefined);
    await dropRole(role).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  /** `npx event-assembler <args>` → this checkout's CLI, in the project directory. */
  function cli(args: readonly string[]): readonly string[] {
    return ['--import', 'tsx', path.join(root, 'src', 'cli', 'main.ts'), ...args.map((a) => connections.get(a) ?? a)];
  }

  it('has the table, the contract, the configuration and the commands', () => {
    expect(fences.map((f) => f.lang)).toEqual(['sql', 'json', 'ts', 'bash']);
    expect(fences.map((f) => f.file)).toEqual([null, 'contracts/OrderPlaced.v1.schema.json', 'event-assembler.config.ts', null]);
  });

  it('turns an insert into the promised event, with setup and run as written', async () => {
    const [table, contract, config, script] = fences as [Fence, Fence, Fence, Fence];
    for (const file of [contract, config]) {
      mkdirSync(path.dirname(path.join(dir, file.file!)), { recursive: true });
      writeFileSync(path.join(dir, file.file!), `${file.code}\n`);
    }
    await db.query(table.code);

    const env: Record<string, string> = {};
    const commands = shellCommands(script.code);
    expect(commands.map((c) => words(c).slice(0, 3).join(' '))).toEqual([
      'npx event-assembler setup',
      `export CAPTURE_DATABASE_URL=${[...connections.keys()][1]}`,
      'export KURRENTDB_URL=kurrentdb://localhost:2113?tls=false',
      'npx event-assembler run',
    ]);
    let run: ReturnType<typeof spawn> | undefined;
    let stderr = '';
    try {
      for (const command of commands) {
        const [first, ...rest] = words(command);
        if (first === 'export') {
          const [name, ...value] = rest.join(' ').split('=');
          env[name!] = connections.get(value.join('=')) ?? value.join('=');
          continue;
        }
        expect([first, rest[0]]).toEqual(['npx', 'event-assembler']);
        const args = rest.slice(1);
        if (args[0] === 'setup') {
          const setup = spawnSync(process.execPath, cli(args), { cwd: dir, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
          expect(setup.status, setup.stderr).toBe(0);
          expect(setup.stdout).toContain('publication shop_events: created for public.orders');
          expect(setup.stdout).toContain('slot shop_assembler: created');
          // "run the capture-role SQL that setup printed, as an administrator, with a password of your own (here: secret)"
          const roleSql = setup.stdout.slice(setup.stdout.indexOf('-- Least-privilege capture role'));
          expect(roleSql).toContain(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '<password>';`);
          await db.query(roleSql.replace("'<password>'", "'secret'"));
        } else {
          expect(args[0]).toBe('run');
          run = spawn(process.execPath, cli(args), { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
          run.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        }
      }
      const child = run!;
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      const logged = () => stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string });
      await vi.waitFor(() => expect(logged().map((l) => l.msg), stderr).toContain('assembler started'), { timeout: 60_000, interval: 100 });

      await db.query(`INSERT INTO public.orders VALUES (1, 'c-1', 19.90, 'leave at the door')`);
      await vi.waitFor(() => expect(kdb.readStreamEvents('order-1')).toHaveLength(1), { timeout: 30_000, interval: 50 });
      const [event] = kdb.readStreamEvents('order-1');
      expect(event!.type).toBe('OrderPlaced');
      expect(JSON.parse(Buffer.from(event!.data).toString('utf8'))).toEqual({ orderId: '1', customerId: 'c-1', total: '19.90' });
      expect(Buffer.from(event!.metadata).toString('utf8')).not.toContain('leave at the door');

      child.kill('SIGINT'); // Ctrl-C
      const code = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000).unref())]);
      expect(code, stderr).toBe(0);
      expect(logged().map((l) => l.msg)).toContain('assembler stopped');
    } finally {
      if (run && run.exitCode === null && run.signalCode === null) run.kill('SIGKILL');
    }
  });
});
