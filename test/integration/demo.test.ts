// `event-assembler demo` (`npm start`) as a user runs it: a child process, its output and exit
// status — on the test's own PostgreSQL database and in-memory KurrentDB (so the destination can
// be inspected afterwards), on a server holding tables of the user's own (which it must leave
// alone), on its own embedded servers, and interrupted with Ctrl-C.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { FORWARDS, KurrentDBClient, START } from '@kurrent/kurrentdb-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createWorkloadPlanner } from '../../examples/invoicing/workload.js';
import { createTestDatabase, startEmbeddedPostgres, type EmbeddedPostgres, type TestDatabase } from '../../src/testing/postgres.js';
import { isPortOpen } from '../../src/testing/postgres-process.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RUN_TIMEOUT_MS = 150_000;

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the CLI as `npm start` does; `onOutput` may act on what it printed so far (e.g. interrupt it). */
function demo(args: string[], onOutput?: (stdout: string, child: ReturnType<typeof spawn>) => void): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'demo', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`demo did not finish within ${RUN_TIMEOUT_MS} ms\n${stdout}\n${stderr}`));
    }, RUN_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      onOutput?.(stdout, child);
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('demo on given servers (--source, --kurrentdb)', () => {
  let db: TestDatabase;
  let kurrent: InMemoryKurrentDB;
  let run: Run;

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'demo');
    kurrent = await startInMemoryKurrentDB();
    run = await demo(['--duration', '3', '--rate', '150', '--customers', '50', '--source', db.connectionString, '--kurrentdb', kurrent.connectionString]);
  }, RUN_TIMEOUT_MS + 30_000);

  afterAll(async () => {
    await kurrent?.close();
    await db?.drop();
  });

  it('exits 0 with a summary whose destination check holds', () => {
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/destination check: OK — (\d+) events expected from (\d+) source transactions, \1 found/);
    expect(run.stdout).toContain('missing 0, duplicated 0, extra 0, out of order 0 streams, different 0');
    expect(run.stdout).toMatch(/sensitive +none of \d+ customer email\/card_number values/);
    expect(run.stdout).toMatch(/lag +commit → durable in KurrentDB over \d+ transactions: p50 \d+ ms, p99 \d+ ms/);
    for (const type of ['CustomerRegistered', 'InvoiceDrafted', 'InvoiceIssued', 'InvoicePaid', 'InvoiceVoided']) expect(run.stdout).toMatch(new RegExp(`${type} +[1-9]\\d* +\\(source history: [1-9]`));
    // Rows seeded before the assembler starts arrive as snapshot records: InvoiceImported, one per seeded invoice.
    const imported = /InvoiceImported +([1-9]\d*) +\(source history: ([1-9]\d*)\)/.exec(run.stdout);
    expect(imported, run.stdout).not.toBeNull();
    expect(imported![1]).toBe(imported![2]);
    const seededInvoices = /seeded \d+ customers, (\d+) invoices .*before the assembler starts/.exec(run.stdout);
    expect(seededInvoices, run.stdout).not.toBeNull();
    expect(imported![1]).toBe(seededInvoices![1]);
    expect(run.stdout).toMatch(/snapshot +generation 1 \(initial-snapshot\): \d+ rows read at the slot's exported snapshot → \d+ events; complete, streaming from consistent point \d+\/[0-9A-F]+/);
    expect(run.stdout.trimEnd().endsWith('demo: OK')).toBe(true);
  });

  it('puts no customer email or card_number into any destination event, data or metadata', async () => {
    // The demo drops its schema at the end, so the customers are planned again: the workload is
    // deterministic (seed 1, the run's id prefix r<tag>). Planning more operations than ran gives
    // a superset of the values written, which only makes the check stricter.
    const tag = /slot demo_([0-9a-f]{6}) created/.exec(run.stdout)?.[1];
    const liveTransactions = Number(/live: (\d+) transactions/.exec(run.stdout)?.[1]);
    expect(tag, run.stdout).toBeDefined();
    const planner = createWorkloadPlanner({ seed: 1, idPrefix: `r${tag}` });
    const registered = [...planner.seedBatch(50).customers, ...Array.from({ length: liveTransactions * 2 + 1000 }, () => planner.next())];
    const sensitive = registered.flatMap((op) => (op.kind === 'register-customer' ? [op.email, op.cardNumber] : []));
    expect(sensitive.length).toBeGreaterThan(100);
    const client = KurrentDBClient.connectionString(kurrent.connectionString);
    let events = 0;
    try {
      for await (const resolved of client.readAll({ direction: FORWARDS, fromPosition: START })) {
        if (!resolved.event || resolved.event.streamId.startsWith('$')) continue;
        events += 1;
        const raw = JSON.stringify(resolved.event.data) + JSON.stringify(resolved.event.metadata);
        for (const value of sensitive) expect(raw.includes(value), `${value} in ${resolved.event.streamId}`).toBe(false);
      }
    } finally {
      await client.dispose();
    }
    expect(events).toBeGreaterThan(300);
  });

  it('runs the invoicing projections to the end of the streams and their balances agree with the source', async () => {
    const line = /projections +invoices (\d+) rows, customerSummary (\d+) rows caught up in \d+\.\d s; balances: OK \((\d+) invoices?, (\d+) customers? checked\)/.exec(run.stdout);
    expect(line, run.stdout).not.toBeNull();
    expect(line![1]).toBe(line![3]); // one row per source invoice
    expect(line![2]).toBe(line![4]); // one row per customer with invoices
    expect(Number(line![1])).toBeGreaterThan(50);
    // The production check too: reconcile at a consistent cut, every invoice agreeing.
    const reconciled = /reconcile +at cut [0-9A-F]+\/[0-9A-F]+: demo_\w+\.invoice (\d+) rows agree with their streams/.exec(run.stdout);
    expect(reconciled, run.stdout).not.toBeNull();
    expect(reconciled![1]).toBe(line![1]);
    // The projections' schema (tables and the kit's state) is the demo's own: dropped at the end.
    expect(await db.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'demo\\_%'`)).toEqual([]);
  });

  it('leaves no slot, publication or capture role behind on a given server', async () => {
    expect(await db.query(`SELECT slot_name FROM pg_replication_slots WHERE database = current_database()`)).toEqual([]);
    expect(await db.query(`SELECT pubname FROM pg_publication`)).toEqual([]);
    expect(await db.query(`SELECT rolname FROM pg_roles WHERE rolname LIKE 'demo_capture_%'`)).toEqual([]);
  });
});

describe('demo on a server with tables of its own (--source)', () => {
  let server: EmbeddedPostgres;
  let source: string;
  let run: Run;
  // The user's tables, named like the example's: the demo must neither use nor touch them.
  const userTables = `
    CREATE TABLE public.customer (id int PRIMARY KEY, full_name text NOT NULL, email text);
    CREATE TABLE public.invoice (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES public.customer(id), amount numeric(10,2), memo text);
    INSERT INTO public.customer VALUES (7, 'Someone Else', 'someone@elsewhere.test');
    INSERT INTO public.invoice VALUES (1, 7, 12.50, 'not the demo''s');`;
  const shape = (database: string) =>
    server.query(`SELECT table_schema, table_name, column_name, data_type, ordinal_position FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2, 5`, [], { database });
  // xmin shows a row rewritten even with the same values; the scan counters show reads (flushed when each session ends).
  const rows = async (database: string) => ({
    customer: await server.query(`SELECT xmin::text AS xmin, * FROM public.customer ORDER BY id`, [], { database }),
    invoice: await server.query(`SELECT xmin::text AS xmin, * FROM public.invoice ORDER BY id`, [], { database }),
  });
  const scanCounts = (database: string) => server.query(`SELECT relname, seq_scan + coalesce(idx_scan, 0) AS scans FROM pg_stat_user_tables WHERE schemaname = 'public' ORDER BY relname`, [], { database });
  /** The scan counters once they stand still: a session flushes its counts as it exits, just after its client has gone. */
  const scans = async (database: string) => {
    let last = JSON.stringify(await scanCounts(database));
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const now = JSON.stringify(await scanCounts(database));
      if (now === last) return JSON.parse(now) as unknown;
      last = now;
    }
  };
  let before: { shape: unknown; rows: unknown; scans: unknown };

  beforeAll(async () => {
    server = await startEmbeddedPostgres();
    await server.createDatabase('shop');
    for (const statement of userTables.split(';').filter((sql) => sql.trim() !== '')) await server.query(statement, [], { database: 'shop' });
    before = { shape: await shape('shop'), rows: await rows('shop'), scans: await scans('shop') };
    source = server.connectionString({ database: 'shop' });
    run = await demo(['--duration', '2', '--rate', '100', '--customers', '20', '--source', source]);
  }, RUN_TIMEOUT_MS + 30_000);

  afterAll(async () => {
    await server?.destroy();
  });

  it('runs in a schema of its own carrying the run tag and passes', () => {
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/schema: examples\/invoicing\/schema\.sql applied in schema demo_[0-9a-f]{6} \(the demo's own, dropped at the end\)/);
    expect(run.stdout).toMatch(/publication demo_[0-9a-f]{6}: created for demo_[0-9a-f]{6}\.customer, demo_[0-9a-f]{6}\.invoice, demo_[0-9a-f]{6}\.invoice_line, demo_[0-9a-f]{6}\.payment/);
    expect(run.stdout).not.toContain('already present');
    expect(run.stdout).toContain('destination check: OK');
    expect(run.stdout.trimEnd().endsWith('demo: OK')).toBe(true);
  });

  it("leaves the user's public.customer and public.invoice as they were: same columns, same rows, not read", async () => {
    // Scans first: reading the rows below counts as a scan.
    expect(await scans('shop')).toEqual(before.scans);
    expect(await shape('shop')).toEqual(before.shape);
    expect(await rows('shop')).toEqual(before.rows);
  });

  it('leaves no schema, role, slot or publication of its own behind', async () => {
    expect(await server.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'demo\\_%'`, [], { database: 'shop' })).toEqual([]);
    expect(await server.query(`SELECT rolname FROM pg_roles WHERE rolname LIKE 'demo\\_%'`)).toEqual([]);
    expect(await server.query(`SELECT slot_name FROM pg_replication_slots`)).toEqual([]);
    expect(await server.query(`SELECT pubname FROM pg_publication`, [], { database: 'shop' })).toEqual([]);
  });

  it('drops its schema, role, slots and publication when interrupted with Ctrl-C too', async () => {
    let interrupted = false;
    const stopped = await demo(['--duration', '60', '--customers', '20', '--source', source], (stdout, child) => {
      if (!interrupted && stdout.includes('workload:')) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    expect(interrupted).toBe(true);
    expect(stopped.code, `${stopped.stdout}\n${stopped.stderr}`).toBe(130);
    expect(stopped.stdout).toMatch(/applied in schema demo_[0-9a-f]{6}/);
    expect(await server.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'demo\\_%'`, [], { database: 'shop' })).toEqual([]);
    expect(await server.query(`SELECT rolname FROM pg_roles WHERE rolname LIKE 'demo\\_%'`)).toEqual([]);
    expect(await server.query(`SELECT slot_name FROM pg_replication_slots`)).toEqual([]);
    expect(await server.query(`SELECT pubname FROM pg_publication`, [], { database: 'shop' })).toEqual([]);
    expect(await rows('shop')).toEqual(before.rows);
  }, RUN_TIMEOUT_MS);
});

describe('demo on its own servers', () => {
  it('runs on embedded PostgreSQL and the in-memory KurrentDB and exits 0', async () => {
    const run = await demo(['--duration', '2', '--customers', '20']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toContain('(embedded)');
    expect(run.stdout).toContain('destination check: OK');
    expect(run.stdout).toMatch(/projections +invoices \d+ rows, customerSummary \d+ rows caught up in \d+\.\d s; balances: OK/);
    expect(run.stdout).toMatch(/reconcile +at cut \S+: invoicing\.invoice \d+ rows agree with their streams/);
    const port = Number(/PostgreSQL 17 on 127\.0\.0\.1:(\d+)/.exec(run.stdout)?.[1]);
    expect(await isPortOpen('127.0.0.1', port)).toBe(false);
  }, RUN_TIMEOUT_MS);

  it('cleans up every server it started on Ctrl-C', async () => {
    let interrupted = false;
    const run = await demo(['--duration', '60', '--customers', '20'], (stdout, child) => {
      if (!interrupted && stdout.includes('workload:')) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    expect(interrupted).toBe(true);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(130);
    expect(run.stderr).toContain('everything it started was cleaned up');
    const pgPort = Number(/PostgreSQL 17 on 127\.0\.0\.1:(\d+)/.exec(run.stdout)?.[1]);
    const kurrentPort = Number(/in-memory KurrentDB on 127\.0\.0\.1:(\d+)/.exec(run.stdout)?.[1]);
    expect(await isPortOpen('127.0.0.1', pgPort)).toBe(false);
    expect(await isPortOpen('127.0.0.1', kurrentPort)).toBe(false);
  }, RUN_TIMEOUT_MS);

  it('teaches with --help', async () => {
    const run = await new Promise<Run>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'demo', '--help'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
      child.once('error', reject);
      child.once('close', (code) => resolve({ code, stdout, stderr: '' }));
    });
    expect(run.code).toBe(0);
    for (const flag of ['--duration', '--rate', '--concurrency', '--seed', '--customers', '--source', '--kurrentdb', '--keep']) expect(run.stdout).toContain(flag);
    expect(run.stdout).toContain('What it does:');
    expect(run.stdout).toContain('Exit status 0 only when the check holds');
  });
});
