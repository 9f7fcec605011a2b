// Configuration: zod parsing with errors that name the field and the fix, secrets from the
// environment (never shown), defaults from the mappers, and config modules loaded directly —
// a broken module is reported with its file and line.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, ConfigLoadError, createRedactor, defineConfig, incrementalChunkRows, initialChunkRows, loadConfig, parseConfig, redactConnectionString, type AssemblerConfig } from '../../src/config/index.js';
import { mappers } from '../../examples/invoicing/index.js';
import { cliArgs } from '../resilience/assembler-process.js';

const base = defineConfig({
  name: 'invoicing',
  source: { connection: 'postgres://capture:s3cret-pw@db:5432/shop', slot: 'invoicing', publication: 'invoicing' },
  destination: { connectionString: 'kurrentdb://localhost:2113?tls=false' },
  mappers,
  contracts: { dir: 'contracts/invoicing' },
});

function with_(patch: (c: Record<string, any>) => void): AssemblerConfig {
  const copy = structuredClone({ ...base, mappers: undefined }) as Record<string, any>;
  copy['mappers'] = mappers;
  patch(copy);
  return copy as AssemblerConfig;
}

function errorOf(config: AssemblerConfig): ConfigError {
  try {
    parseConfig(config);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('parseConfig', () => {
  it('fills the documented defaults and derives the captured tables from the mappers', () => {
    const c = parseConfig(base);
    expect(c.destination.mode).toBe('auto');
    expect(c.snapshot).toEqual({ mode: 'never', parallelism: 1, readAhead: 0 });
    expect([initialChunkRows(c), incrementalChunkRows(c)]).toEqual([256, 1024]);
    const set = parseConfig({ ...base, snapshot: { chunkSize: 100 } });
    expect([initialChunkRows(set), incrementalChunkRows(set)]).toEqual([100, 100]);
    expect(c.failurePolicy).toEqual({ contractViolation: 'halt' });
    expect(c.limits).toEqual({ maxInFlightTransactions: 4000, maxInFlightBytes: 64 * 1024 * 1024, memoryLimitBytes: 64 * 1024 * 1024, maxConcurrentAppends: 4, minConcurrentBatch: 64, maxBatchTransactions: 512, maxBatchEvents: 2048, maxCachedStreams: 100_000 });
    expect(c.source.publication).toEqual(['invoicing']);
    expect(c.source.tables.map((t) => t.table)).toEqual(['public.customer', 'public.invoice', 'public.invoice_line', 'public.payment']);
    // invoice-lifecycle reads the old status ⇒ old values are needed for public.invoice only.
    expect(c.source.tables.filter((t) => t.needsOldValues).map((t) => t.table)).toEqual(['public.invoice']);
    expect(c.source.tables.find((t) => t.table === 'public.customer')?.requiredColumns).toEqual(['country', 'id', 'name']);
    expect(c.observability).toBeNull(); // off unless a port is set
  });

  it('observability: off without a section; with a port, loopback, a 10 s heartbeat and a 60 s freshness limit by default', () => {
    expect(parseConfig(with_((c) => (c['observability'] = { port: 0 }))).observability).toEqual({ port: 0, host: '127.0.0.1', heartbeatIntervalMs: 10_000, maxFreshnessMs: 60_000 });
    expect(parseConfig(with_((c) => (c['observability'] = { port: 9464, host: '0.0.0.0', heartbeatIntervalMs: 5_000, maxFreshnessMs: 30_000 }))).observability).toEqual({
      port: 9464, host: '0.0.0.0', heartbeatIntervalMs: 5_000, maxFreshnessMs: 30_000,
    });
    const error = errorOf(with_((c) => (c['observability'] = { port: 70_000, heartbeatIntervalMs: 10, extra: true })));
    expect(error.problems.map((p) => p.field).sort()).toEqual(['observability.extra', 'observability.heartbeatIntervalMs', 'observability.port']);
    expect(error.problems.find((p) => p.field === 'observability.port')?.fix).toMatch(/0 picks a free one/);
    expect(errorOf(with_((c) => (c['observability'] = { host: 'localhost' }))).problems).toEqual([{ field: 'observability.port', problem: 'is required', fix: expect.stringMatching(/observability\.port/) }]);
  });

  it.each([
    ['name', (c: Record<string, any>) => (c['name'] = 'has space'), /name: must be 1-100 letters/],
    ['source.slot', (c: Record<string, any>) => (c['source'].slot = 'Bad-Slot'), /source\.slot: slot names are lower-case/],
    ['source.connection', (c: Record<string, any>) => delete c['source'].connection, /source\.connection: is required — fix: set source\.connection to env:VARIABLE/],
    ['destination.mode', (c: Record<string, any>) => (c['destination'].mode = 'fast'), /destination\.mode: .*fix: use 'auto'/],
    ['contracts.dir', (c: Record<string, any>) => (c['contracts'].dir = 'no/such/dir'), /contracts\.dir: directory .*no\/such\/dir does not exist/],
    ['failurePolicy.contractViolation', (c: Record<string, any>) => (c['failurePolicy'] = { contractViolation: 'ignore' }), /failurePolicy\.contractViolation: .*fix: use 'halt'/],
    ['limits.maxInFlightTransactions', (c: Record<string, any>) => (c['limits'] = { maxInFlightTransactions: 0 }), /limits\.maxInFlightTransactions: /],
    ['mappers', (c: Record<string, any>) => (c['mappers'] = []), /mappers: list at least one mapper/],
    ['mappers.1', (c: Record<string, any>) => (c['mappers'] = [mappers[0], { name: 'x' }]), /mappers\.1: must be a mapper made by defineMapper/],
    ['source.tables', (c: Record<string, any>) => (c['source'].tables = ['public.customer']), /source\.tables: public\.invoice is read by mapper\(s\) invoice-lifecycle.* but not captured/],
    ['source.tables.0', (c: Record<string, any>) => (c['source'].tables = ['customer']), /source\.tables\.0: "customer" is not schema-qualified — fix: write it as public\.customer/],
    ['source.slotName', (c: Record<string, any>) => (c['source'].slotName = 'x'), /source\.slotName: unknown field\(s\) "slotName" — fix: remove it or check its spelling/],
    // pg reads only URLs: anything else it took for a database on a host "base", and start-up waited for that host.
    ['source.connection', (c: Record<string, any>) => (c['source'].connection = 'db.internal:5432/shop'), /source\.connection: "db\.internal:5432\/shop" is not a postgres:\/\/ URL — fix: write it as postgres:\/\/user:password@host:5432\/database/],
    // The keyword form is read (several hosts for failover), and a host list that does not parse is named.
    ['source.connection', (c: Record<string, any>) => (c['source'].connection = 'host=db,,db2 user=capture password=s3cret-pw'), /source\.connection: "host=db,,db2 user=capture password=\*\*\*": the host list has an empty entry — fix: write the hosts as postgres:\/\//],
    ['source.connection', (c: Record<string, any>) => (c['source'].connection = 'postgres://capture:s3cret-pw@db1:5432,db2:5432/shop?target_session_attrs=standby'), /target_session_attrs=standby would connect to a standby, but capture needs the primary \(it streams a replication slot\) — fix: use target_session_attrs=read-write/],
    ['source.connection', (c: Record<string, any>) => (c['source'].connection = 'postgres://capture:s3cret-pw@db:99999/shop'), /source\.connection: "postgres:\/\/capture:\*\*\*@db:99999\/shop" is not a valid URL/],
    ['destination.connectionString', (c: Record<string, any>) => (c['destination'].connectionString = 'http://localhost:2113'), /destination\.connectionString: not a KurrentDB connection string: Unexpected "http:\/\/" at position 0, expected kurrentdb:\/\/.* — fix: set destination\.connectionString/],
    ['destination.connectionString', (c: Record<string, any>) => (c['destination'].connectionString = 'kurrentdb://localhost:2113?tls=maybe'), /destination\.connectionString: not a KurrentDB connection string: Unexpected "maybe"/],
    // Spilling starts in the middle of a large transaction: too late to find the directory missing.
    ['source.spillDir', (c: Record<string, any>) => (c['source'].spillDir = '/no/such/spill/dir'), /source\.spillDir: directory \/no\/such\/spill\/dir does not exist — fix: set source\.spillDir to an existing directory/],
    ['limits.maxConcurrentAppends', (c: Record<string, any>) => (c['limits'] = { maxConcurrentAppends: 65 }), /limits\.maxConcurrentAppends: Too big: expected number to be <=64 — fix: use positive integers \(at most 64\)/],
    ['source.statusIntervalMs', (c: Record<string, any>) => (c['source'].statusIntervalMs = 50), /source\.statusIntervalMs: Too small: expected number to be >=100 — fix: use whole milliseconds, at least 100 and at most half the server's wal_sender_timeout/],
  ])('names the field: %s', (field, patch, message) => {
    const error = errorOf(with_(patch));
    expect(error.field).toBe(field);
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toMatch(message);
    expect(error.message).toContain('fix:');
    expect(error.message).not.toContain('s3cret-pw');
  });

  it("refuses an unknown snapshot mode, naming the field", () => {
    const error = errorOf(with_((c) => (c['snapshot'] = { mode: 'sometimes' })));
    expect(error.field).toBe('snapshot.mode');
    expect(error.message).toContain('when_needed');
  });

  it("accepts snapshot modes 'initial', 'when_needed' and 'initial_only'", () => {
    for (const mode of ['initial', 'when_needed', 'initial_only'] as const) {
      expect(parseConfig(with_((c) => (c['snapshot'] = { mode, chunkSize: 100 }))).snapshot).toEqual({ mode, chunkSize: 100, parallelism: 1, readAhead: 0 });
    }
  });

  it('takes snapshot.readAhead 0 to 3, and refuses another value naming the field and its fix', () => {
    expect(parseConfig(with_((c) => (c['snapshot'] = { mode: 'never', readAhead: 1 }))).snapshot.readAhead).toBe(1);
    for (const readAhead of [4, -1, 1.5]) {
      const error = errorOf(with_((c) => (c['snapshot'] = { mode: 'never', readAhead })));
      expect(error.field).toBe('snapshot.readAhead');
      expect(error.message).toContain('use 0 (default), 1, 2 or 3');
    }
  });

  it('reads secrets from environment variables (env:VAR or a function) and says which variable is missing', () => {
    process.env['EA_TEST_CAPTURE_URL'] = 'postgres://capture:from-env-pw@db/shop';
    process.env['EA_TEST_KURRENTDB_URL'] = 'kurrentdb://admin:from-env-pw@kdb:2113?tls=false';
    try {
      const c = parseConfig(with_((x) => (x['source'].connection = 'env:EA_TEST_CAPTURE_URL')));
      expect(c.source.connection).toBe('postgres://capture:from-env-pw@db/shop');
      const f = parseConfig({ ...base, destination: { connectionString: () => process.env['EA_TEST_KURRENTDB_URL'] } });
      expect(f.destination.connectionString).toContain('from-env-pw');
    } finally {
      delete process.env['EA_TEST_CAPTURE_URL'];
      delete process.env['EA_TEST_KURRENTDB_URL'];
    }
    const missing = errorOf(with_((x) => (x['source'].connection = 'env:EA_TEST_NOT_SET')));
    expect(missing.field).toBe('source.connection');
    expect(missing.message).toContain('environment variable EA_TEST_NOT_SET is not set');
    const fn = errorOf({ ...base, destination: { connectionString: () => undefined } });
    expect(fn.field).toBe('destination.connectionString');
  });

  it('masks passwords in connection strings, texts and errors', () => {
    expect(redactConnectionString('postgres://capture:s3cret-pw@db:5432/shop')).toBe('postgres://capture:***@db:5432/shop');
    expect(redactConnectionString('host=db user=capture password=s3cret-pw')).toBe('host=db user=capture password=***');
    const c = parseConfig(base);
    expect(c.redactor.text('connect to postgres://capture:s3cret-pw@db failed; pw was s3cret-pw')).not.toContain('s3cret-pw');
    expect(JSON.stringify(c.redactor.fields({ error: new Error('bad password s3cret-pw') }))).not.toContain('s3cret-pw');
    expect(createRedactor(['postgres://u:p%40ss@h/db']).text('p@ss and p%40ss')).toBe('*** and ***');
  });
});

describe('parseConfig: every problem at once', () => {
  it('a config with three different problems reports all three; field and details stay the first', () => {
    const error = errorOf(
      with_((c) => {
        c['name'] = 'has space';
        c['destination'].connectionString = 'env:EA_TEST_NOT_SET_KURRENTDB';
        c['contracts'].dir = 'no/such/dir';
      }),
    );
    expect(error.problems.map((p) => p.field)).toEqual(['name', 'destination.connectionString', 'contracts.dir']);
    expect(error.field).toBe('name');
    expect(error.details).toEqual(error.problems[0]);
    expect(error.problems[1]).toEqual({ field: 'destination.connectionString', problem: 'environment variable EA_TEST_NOT_SET_KURRENTDB is not set', fix: 'export EA_TEST_NOT_SET_KURRENTDB=<connection string> before starting' });
    const lines = error.message.split('\n');
    expect(lines[0]).toBe('invalid configuration: 3 problems:');
    expect(lines.slice(1)).toHaveLength(3);
    expect(lines[1]).toMatch(/^ {2}- name: must be 1-100 letters.* — fix: /);
    expect(lines[2]).toMatch(/^ {2}- destination\.connectionString: environment variable EA_TEST_NOT_SET_KURRENTDB is not set — fix: export/);
    expect(lines[3]).toMatch(/^ {2}- contracts\.dir: directory .*no\/such\/dir does not exist — fix: /);
  });

  it('both secrets, duplicate mapper names, unqualified and uncaptured tables, the lifecycle section: each reported', () => {
    const error = errorOf(
      with_((c) => {
        c['source'].connection = 'env:EA_TEST_NOT_SET_CAPTURE';
        c['destination'].connectionString = 'env:EA_TEST_NOT_SET_KURRENTDB';
        c['mappers'] = [...mappers, mappers[0]];
        c['source'].tables = ['customer', 'public.invoice'];
        c['lifecycle'] = { drainTimeoutMs: 0 };
      }),
    );
    expect(error.problems.map((p) => [p.field, p.problem])).toEqual([
      ['lifecycle.drainTimeoutMs', expect.any(String)],
      [`mappers.${mappers.length}`, `two mappers are named "${mappers[0]!.name}"`],
      ['source.tables.0', '"customer" is not schema-qualified'],
      ['source.tables', expect.stringMatching(/^public\.invoice_line is read by mapper\(s\) .* but not captured$/)],
      ['source.tables', expect.stringMatching(/^public\.payment is read by mapper\(s\) .* but not captured$/)],
      ['source.connection', 'environment variable EA_TEST_NOT_SET_CAPTURE is not set'],
      ['destination.connectionString', 'environment variable EA_TEST_NOT_SET_KURRENTDB is not set'],
    ]);
    expect(error.field).toBe('lifecycle.drainTimeoutMs');
    expect(error.message.split('\n')).toHaveLength(8);
  });

  it('a field zod reports is not checked again; one problem keeps the one-line message', () => {
    const error = errorOf(with_((c) => delete c['source'].connection));
    expect(error.problems).toEqual([{ field: 'source.connection', problem: 'is required', fix: expect.stringContaining('env:VARIABLE') }]);
    expect(error.message).toBe(`invalid configuration: source.connection: is required — fix: ${error.details.fix}`);
  });

  it('keeps the lifecycle section and its defaults', () => {
    expect(parseConfig(base).lifecycle).toEqual({ drainTimeoutMs: 10_000, startupTimeoutMs: null });
    expect(parseConfig(with_((c) => (c['lifecycle'] = { drainTimeoutMs: 5_000, startupTimeoutMs: 60_000 }))).lifecycle).toEqual({ drainTimeoutMs: 5_000, startupTimeoutMs: 60_000 });
  });

  it('ConfigError.of builds the error from a list, and refuses an empty one', () => {
    const error = ConfigError.of([
      { field: 'a', problem: 'is wrong', fix: 'mend a' },
      { field: 'b', problem: 'is wrong too', fix: '' },
    ]);
    expect(error.field).toBe('a');
    expect(error.message).toBe('invalid configuration: 2 problems:\n  - a: is wrong — fix: mend a\n  - b: is wrong too');
    expect(() => ConfigError.of([])).toThrow(TypeError);
  });
});

describe('loadConfig', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ea-config-'));
  // An ESM package, like a project using this library (tsx then keeps line numbers via source maps).
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const src = (path: string) => pathToFileURL(join(process.cwd(), path)).href;

  it('loads a TypeScript module directly and validates it', async () => {
    const file = join(dir, 'ok.config.ts');
    writeFileSync(
      file,
      [
        `import { defineConfig } from '${src('src/config/index.ts')}';`,
        `import { mappers } from '${src('examples/invoicing/index.ts')}';`,
        `const port: number = 2113;`,
        `export default defineConfig({`,
        `  name: 'invoicing',`,
        `  source: { connection: () => 'postgres://c:pw@localhost/db', slot: 'invoicing', publication: 'invoicing' },`,
        `  destination: { connectionString: \`kurrentdb://localhost:\${port}?tls=false\`, mode: 'per-stream' },`,
        `  mappers,`,
        `  contracts: { dir: '${join(process.cwd(), 'contracts/invoicing')}' },`,
        `});`,
      ].join('\n'),
    );
    const c = await loadConfig(file);
    expect(c.name).toBe('invoicing');
    expect(c.destination).toMatchObject({ connectionString: 'kurrentdb://localhost:2113?tls=false', mode: 'per-stream' });
    expect(c.mappers.map((m) => m.name)).toEqual(['customers', 'invoice-lifecycle', 'payments', 'invoice-import']);
  });

  it('names the file and line of a TypeScript syntax error', async () => {
    const file = join(dir, 'broken.config.ts');
    writeFileSync(file, ['// a config', 'export default {', "  name: 'x',", '  source: { slot: ,', '};'].join('\n'));
    const error = await loadConfig(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigLoadError);
    expect((error as ConfigLoadError).file).toBe(file);
    expect((error as ConfigLoadError).line).toBe(4);
    expect((error as Error).message).toContain(`${file}:4`);
  });

  it('names the file and line of a JavaScript syntax error', async () => {
    const file = join(dir, 'broken.config.mjs');
    writeFileSync(file, ['export default {', "  name: 'x'", "  source: {}", '};'].join('\n'));
    const error = (await loadConfig(file).catch((e: unknown) => e)) as ConfigLoadError;
    expect(error).toBeInstanceOf(ConfigLoadError);
    expect(error.file).toBe(file);
    expect(error.line).toBe(3);
    expect(error.message).toMatch(/SyntaxError/);
  });

  it('names the line where a module throws while loading (the CLI, exit code 2)', () => {
    // Through the real CLI: vitest replaces Node's source-mapped stack traces with its own.
    const file = join(dir, 'throws.config.ts');
    writeFileSync(file, ['const a: number = 1;', 'if (a) {', "  throw new Error('KURRENTDB_URL missing');", '}', 'export default {};'].join('\n'));
    const result = spawnSync(process.execPath, [...cliArgs(), 'run', '--config', file], { encoding: 'utf8', timeout: 30_000 });
    expect(result.status).toBe(2);
    const line = JSON.parse(result.stderr.trim().split('\n').pop()!) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 'error', code: 'CONFIG_LOAD_FAILED', file, line: 3 });
    expect(line['msg']).toContain(`${file}:3`);
    expect(line['msg']).toContain('KURRENTDB_URL missing');
  });

  it('says when the file is missing or has no default export', async () => {
    await expect(loadConfig(join(dir, 'nope.ts'))).rejects.toThrow(/does not exist/);
    const file = join(dir, 'noexport.config.mjs');
    writeFileSync(file, 'export const x = 1;\n');
    await expect(loadConfig(file)).rejects.toThrow(/no default export/);
  });

  it('validates what it loaded: errors name the field', async () => {
    const file = join(dir, 'invalid.config.mjs');
    writeFileSync(file, "export default { name: 'x', source: { connection: 'env:EA_TEST_UNSET_VAR', slot: 's', publication: 'p' }, destination: { connectionString: 'k' }, mappers: [], contracts: { dir: '.' } };\n");
    const error = await loadConfig(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).field).toBe('mappers');
  });
});
