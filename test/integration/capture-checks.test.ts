// Start-up checks, setup and the capture role: bad configuration fails before streaming,
// naming the table (or slot, publication, option) and the exact fix.
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { SourceCheckError, SourceChecksFailedError } from '../../src/source/checks.js';
import { createPostgresSource, SourceConfigError, type PostgresSourceOptions } from '../../src/source/index.js';
import { compareLsn, decodeCheckpoint, encodeCheckpoint, formatLsn, parseLsn } from '../../src/source/position.js';
import { backoffDelay, standbyStatusUpdate } from '../../src/source/replication.js';
import { captureRoleSql, setupCapture } from '../../src/source/setup.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { dropRole } from '../support/roles.js';

describe('capture start-up checks and setup (PostgreSQL 17)', () => {
  let db: TestDatabase;
  let role: string;
  const password = 'capture-secret';

  const options = (over: Partial<PostgresSourceOptions>): PostgresSourceOptions => ({
    connection: db.connectionConfig({ user: role, password }),
    slot: 'checks_slot',
    publication: 'pub_checks',
    tables: ['public.invoice'],
    ...over,
  });

  async function startError(over: Partial<PostgresSourceOptions>): Promise<unknown> {
    const source = createPostgresSource(options(over));
    try {
      await source.start();
      return undefined;
    } catch (error) {
      return error;
    } finally {
      await source.close();
    }
  }

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'capture_checks');
    role = `cap_${db.database}`.slice(0, 63);
    await db.query(`
      CREATE TABLE public.invoice (id int PRIMARY KEY, total numeric);
      CREATE TABLE public.nokey (code text NOT NULL, note text);
      CREATE UNIQUE INDEX nokey_code ON public.nokey (code);
      CREATE TABLE public.by_index (code text NOT NULL, note text);
      CREATE UNIQUE INDEX by_index_code ON public.by_index (code);
      ALTER TABLE public.by_index REPLICA IDENTITY USING INDEX by_index_code;
      CREATE TABLE public.nothing (id int PRIMARY KEY);
      ALTER TABLE public.nothing REPLICA IDENTITY NOTHING;`);
    // The least-privilege role exactly as `setup --role` prints it.
    const sql = captureRoleSql({ role, tables: ['public.invoice', 'public.nokey', 'public.by_index', 'public.nothing'], database: db.database, password });
    await db.query(sql);
  });

  afterAll(async () => {
    await db?.drop();
    await dropRole(role);
  });

  it('the printed capture role is least-privilege: LOGIN REPLICATION, no superuser, SELECT only', async () => {
    const [r] = await db.query<{ rolsuper: boolean; rolreplication: boolean; rolcanlogin: boolean; rolcreatedb: boolean }>(
      `SELECT rolsuper, rolreplication, rolcanlogin, rolcreatedb FROM pg_roles WHERE rolname = $1`,
      [role],
    );
    expect(r).toEqual({ rolsuper: false, rolreplication: true, rolcanlogin: true, rolcreatedb: false });
    const [p] = await db.query<{ sel: boolean; ins: boolean }>(
      `SELECT has_table_privilege($1, 'public.invoice', 'SELECT') AS sel, has_table_privilege($1, 'public.invoice', 'INSERT') AS ins`,
      [role],
    );
    expect(p).toEqual({ sel: true, ins: false });
  });

  it('setup creates the publication and slot, and is idempotent', async () => {
    const first = await setupCapture({ connection: db.connectionConfig(), publication: 'pub_checks', slot: 'checks_slot', tables: ['public.invoice'] });
    expect(first.publication.action).toBe('created');
    expect(first.slot.action).toBe('created');
    expect(first.slot.lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    const again = await setupCapture({ connection: db.connectionConfig(), publication: 'pub_checks', slot: 'checks_slot', tables: ['public.invoice'] });
    expect(again.publication.action).toBe('unchanged');
    expect(again.slot.action).toBe('exists');
    expect(again.executed).toEqual([]);
    const [slot] = await db.query<{ plugin: string; slot_type: string }>(`SELECT plugin, slot_type FROM pg_replication_slots WHERE slot_name = 'checks_slot'`);
    expect(slot).toEqual({ plugin: 'pgoutput', slot_type: 'logical' });

    // The capture role passes every check with the right configuration.
    const source = createPostgresSource(options({}));
    const report = await source.start();
    expect(report?.tables[0]).toMatchObject({ table: 'public.invoice', replicaIdentity: 'default', keyColumns: ['id'] });
    await source.close();
  });

  it('setup refuses to silently change a publication with other tables, and changes it when asked', async () => {
    await setupCapture({ connection: db.connectionConfig(), publication: 'pub_other', slot: 'other_slot', tables: ['public.invoice'] });
    const error = await setupCapture({ connection: db.connectionConfig(), publication: 'pub_other', slot: 'other_slot', tables: ['public.invoice', 'public.by_index'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SourceCheckError);
    expect((error as SourceCheckError).code).toBe('SOURCE_PUBLICATION_MISMATCH');
    expect((error as SourceCheckError).fix).toBe('ALTER PUBLICATION pub_other SET TABLE public.invoice, public.by_index;');
    const updated = await setupCapture({ connection: db.connectionConfig(), publication: 'pub_other', slot: 'other_slot', tables: ['public.invoice', 'public.by_index'], updatePublication: true });
    expect(updated.publication.action).toBe('updated');
  });

  it('names the table and the fix when REPLICA IDENTITY is insufficient for needsOldValues', async () => {
    const error = await startError({ tables: [{ table: 'public.invoice', needsOldValues: true }] });
    expect(error).toBeInstanceOf(SourceCheckError);
    expect(error).toMatchObject({ code: 'SOURCE_REPLICA_IDENTITY_INSUFFICIENT', table: 'public.invoice', fix: 'ALTER TABLE public.invoice REPLICA IDENTITY FULL;' });
    expect((error as Error).message).toContain('ALTER TABLE public.invoice REPLICA IDENTITY FULL;');
  });

  it('names the table and the fix when there is no primary key (and suggests the unique index)', async () => {
    await setupCapture({ connection: db.connectionConfig(), publication: 'pub_nokey', slot: 'nokey_slot', tables: ['public.nokey'] });
    const error = await startError({ slot: 'nokey_slot', publication: 'pub_nokey', tables: ['public.nokey'] });
    expect(error).toMatchObject({ code: 'SOURCE_TABLE_NO_KEY', table: 'public.nokey' });
    expect((error as Error).message).toContain('public.nokey');
    expect((error as SourceCheckError).fix).toContain('ALTER TABLE public.nokey ADD PRIMARY KEY');
    expect((error as SourceCheckError).fix).toContain('ALTER TABLE public.nokey REPLICA IDENTITY USING INDEX nokey_code;');
  });

  it('accepts a declared replica identity index instead of a primary key', async () => {
    await setupCapture({ connection: db.connectionConfig(), publication: 'pub_idx', slot: 'idx_slot', tables: ['public.by_index'] });
    const source = createPostgresSource(options({ slot: 'idx_slot', publication: 'pub_idx', tables: ['public.by_index'] }));
    const report = await source.start();
    expect(report?.tables[0]).toMatchObject({ replicaIdentity: 'index', keyColumns: ['code'], identityIndex: 'by_index_code' });
    await source.close();
  });

  it('refuses a status interval that is not well below wal_sender_timeout', async () => {
    const error = await startError({ statusIntervalMs: 40_000 }); // default wal_sender_timeout: 60 s
    expect(error).toBeInstanceOf(SourceConfigError);
    expect(error).toMatchObject({ code: 'SOURCE_CONFIG_INVALID', field: 'statusIntervalMs' });
    expect((error as Error).message).toContain('at most 30000 ms');
  });

  it('reports every problem at once, each with its table', async () => {
    const error = await startError({ slot: 'no_such_slot', tables: ['public.nothing', 'public.missing', { table: 'public.invoice', needsOldValues: true }] });
    expect(error).toBeInstanceOf(SourceChecksFailedError);
    const problems = (error as SourceChecksFailedError).problems.map((p) => [p.code, p.table ?? p.details.slot ?? p.details.publication]);
    expect(problems).toEqual([
      ['SOURCE_REPLICA_IDENTITY_NOTHING', 'public.nothing'],
      ['SOURCE_TABLE_MISSING', 'public.missing'],
      ['SOURCE_REPLICA_IDENTITY_INSUFFICIENT', 'public.invoice'],
      ['SOURCE_SLOT_MISSING', 'no_such_slot'],
      ['SOURCE_PUBLICATION_MISMATCH', 'pub_checks'],
    ]);
    expect((error as Error).message).toContain('ALTER TABLE public.nothing REPLICA IDENTITY DEFAULT;');
  });

  it('rejects bad options naming the field', () => {
    const make = (over: Partial<PostgresSourceOptions>) => () => createPostgresSource({ connection: 'postgres://x@localhost/db', slot: 's', publication: 'p', tables: ['public.t'], ...over });
    expect(make({ slot: 'Bad-Slot' })).toThrow(SourceConfigError);
    expect(make({ slot: 'Bad-Slot' })).toThrow(/"slot"/);
    expect(make({ tables: [] })).toThrow(/"tables"/);
    expect(make({ tables: ['invoice'] })).toThrow(/"tables\.0".*public\.invoice/);
    expect(make({ backoff: { jitter: 2 } })).toThrow(/"backoff\.jitter"/);
    expect(make({ protocolVersion: 1 })).toThrow(/"streaming"/);
    expect(make({ protocolVersion: 1, streaming: false })).not.toThrow();
  });

  it('the setup command prints SQL without connecting, and sets up with --source', async () => {
    const out: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((line: unknown) => void out.push(String(line)));
    try {
      await (await buildProgram()).parseAsync(['node', 'event-assembler', 'setup', '--publication', 'pub_cli', '--slot', 'cli_slot', '--tables', 'public.invoice,public.by_index', '--role', 'shop_capture', '--print-sql']);
      const printed = out.join('\n');
      expect(printed).toContain('CREATE PUBLICATION pub_cli FOR TABLE public.invoice, public.by_index');
      expect(printed).toContain(`pg_create_logical_replication_slot('cli_slot', 'pgoutput')`);
      expect(printed).toContain('CREATE ROLE shop_capture LOGIN REPLICATION');
      expect(printed).toContain('GRANT SELECT ON TABLE public.invoice, public.by_index TO shop_capture;');
      expect(printed).toContain('GRANT USAGE ON SCHEMA public TO shop_capture;');
      expect(await db.query(`SELECT 1 FROM pg_publication WHERE pubname = 'pub_cli'`)).toHaveLength(0);

      out.length = 0;
      await (await buildProgram()).parseAsync(['node', 'event-assembler', 'setup', '--source', db.connectionString, '--publication', 'pub_cli', '--slot', 'cli_slot', '--tables', 'public.invoice']);
      expect(out.join('\n')).toMatch(/publication pub_cli: created[\s\S]*slot cli_slot: created/);
      expect(await db.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = 'cli_slot'`)).toHaveLength(1);
    } finally {
      log.mockRestore();
    }
    const help = (await buildProgram()).commands.find((c) => c.name() === 'setup')?.helpInformation() ?? '';
    expect(help).toContain('--print-sql');
  });

  it('positions: LSNs compare as numbers, checkpoints round-trip, status updates carry the durable LSN', () => {
    expect(compareLsn('0/9', '0/10')).toBeLessThan(0); // as text '0/9' > '0/10'
    expect(compareLsn('1/0', '0/FFFFFFFF')).toBeGreaterThan(0);
    expect(formatLsn(parseLsn('16/b374d848'))).toBe('16/B374D848');
    const checkpoint = encodeCheckpoint({ systemId: '7412345678901234567', timeline: 1, slot: 'shop', commitLsn: '0/1A2B3C', xid: 4_294_967_295 });
    expect(checkpoint).toBe('v1:7412345678901234567:1:shop:0/1A2B3C:4294967295');
    expect(decodeCheckpoint(checkpoint)).toMatchObject({ systemId: '7412345678901234567', timeline: 1, slot: 'shop', commitLsn: '0/1A2B3C', xid: 4_294_967_295, checkpoint });
    expect(() => decodeCheckpoint('v2:1:1:s:0/1:1')).toThrow(RangeError);
    const update = standbyStatusUpdate('1/2', true, Date.UTC(2000, 0, 1, 0, 0, 1));
    expect(update.length).toBe(34);
    expect(update.toString('latin1', 0, 1)).toBe('r');
    for (const offset of [1, 9, 17]) expect(update.readBigUInt64BE(offset)).toBe(0x1_0000_0002n); // write, flush, apply: durable
    expect(update.readBigInt64BE(25)).toBe(1_000_000n); // microseconds since 2000-01-01
    expect(update.readUInt8(33)).toBe(1);
    const b = { initialMs: 100, maxMs: 1_000, multiplier: 2, jitter: 0.5, maxAttempts: Infinity };
    expect([0, 1, 2, 3, 10].map((n) => backoffDelay(n, b, () => 0))).toEqual([100, 200, 400, 800, 1_000]);
    expect(backoffDelay(10, b, () => 1)).toBe(500);
  });
});
