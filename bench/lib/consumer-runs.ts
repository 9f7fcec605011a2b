/**
 * The two consumers of the consumer bench, each applying the ledger's events to a fresh accounts
 * table by increments (`UPDATE … SET balance = balance + $1`), `batch` events per PostgreSQL
 * transaction, from a catch-up subscription to `$all` filtered on `account-`:
 *
 * - kit: `createProjectionRunner` — receipts, entity versions, the checkpoint's compare-and-set,
 *   in each batch's transaction (its own state schema per run, so every run starts from nothing);
 * - plain: the client's subscription, a queue paused at the same high-water mark as the kit's
 *   feed, and BEGIN / one UPDATE per event / COMMIT — no receipts, no checkpoint.
 *
 * A run is timed from the first event handed to a handler to the last one committed, so neither
 * pays for start-up (the kit's store tables, the client's discovery).
 */
import { START, KurrentDBClient, streamNameFilter, type AllStreamResolvedEvent } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import type { LedgerEvents } from './ledger-events.js';
import { createProjectionRunner, defineProjection } from './subject.js';

export interface ConsumerRun {
  readonly seconds: number;
  readonly events: number;
  /** Batches (PostgreSQL transactions) the run committed. */
  readonly batches: number;
  /** CPU time of this process (user + system) over the timed part, in µs per event. */
  readonly cpuPerEvent: number;
}

/** This process's CPU time so far, in µs. */
function cpu(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/** A fresh schema with the accounts table, every account at 0. */
export async function prepareAccounts(pool: pg.Pool, schema: string, accounts: number): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(`CREATE TABLE "${schema}".accounts (id text PRIMARY KEY, balance bigint NOT NULL)`);
  await pool.query(`INSERT INTO "${schema}".accounts SELECT g::text, 0 FROM generate_series(1, $1::int) g`, [accounts]);
}

/** Throws unless every account in `schema` holds its expected balance. */
export async function checkBalances(pool: pg.Pool, schema: string, expected: ReadonlyMap<string, number>): Promise<void> {
  const rows = (await pool.query<{ id: string; balance: string }>(`SELECT id, balance::text FROM "${schema}".accounts`)).rows;
  const wrong = rows.filter((r) => Number(r.balance) !== (expected.get(r.id) ?? 0));
  if (wrong.length > 0) throw new Error(`${schema}: ${wrong.length} accounts off, e.g. ${wrong[0]!.id}: ${wrong[0]!.balance} ≠ ${expected.get(wrong[0]!.id) ?? 0}`);
}

const UPDATE = (schema: string) => `UPDATE "${schema}".accounts SET balance = balance + $1 WHERE id = $2`;

/** Wall time and count per statement (its first words), when a pool's clients are profiled. */
export type StatementProfile = Map<string, { count: number; ms: number }>;

/** Times every query of the pool's clients into `profile`, keyed by the statement's first words (round trip as seen from this process). */
function profileQueries(pool: pg.Pool, profile: StatementProfile): void {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
      const text = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string }).text ?? '?');
      const key = text.replace(/\s+/g, ' ').replace(/"[^"]*"\./g, '').slice(0, 60);
      const t0 = performance.now();
      return query(...args).finally(() => {
        const entry = profile.get(key) ?? { count: 0, ms: 0 };
        entry.count++;
        entry.ms += performance.now() - t0;
        profile.set(key, entry);
      });
    };
  });
}

/** Calls `then` each time a COMMIT of the pool's clients has completed. */
function afterCommit(pool: pg.Pool, then: () => void): void {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
      const result = query(...args);
      if (args[0] === 'COMMIT') void result.then(then, () => undefined);
      return result;
    };
  });
}

export async function runKit(postgres: string, kurrentdb: string, schema: string, batch: number, events: number, profile?: StatementProfile): Promise<ConsumerRun> {
  const pool = new pg.Pool({ connectionString: postgres, max: 1 });
  if (profile) profileQueries(pool, profile);
  let first = 0;
  let cpu0 = 0;
  const mark = () => {
    if (first === 0) {
      first = performance.now();
      cpu0 = cpu();
    }
  };
  const projection = defineProjection<LedgerEvents>({
    name: 'bench_accounts',
    from: { categories: ['account'] },
    batchSize: batch,
    handlers: {
      Deposited: async (event, ctx) => {
        mark();
        await ctx.client.query(UPDATE(ctx.schema), [event.data.amount, event.data.account]);
      },
      Withdrawn: async (event, ctx) => {
        mark();
        await ctx.client.query(UPDATE(ctx.schema), [-event.data.amount, event.data.account]);
      },
    },
  });
  const runner = createProjectionRunner({ projection, postgres: pool, kurrentdb, schema, stateSchema: `${schema}_state` });
  // The runner says nothing per batch: its status is read after each COMMIT (a macrotask later,
  // once it has counted the batch) — no polling timer on the runner's event loop.
  let done: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (done = resolve));
  afterCommit(pool, () => setImmediate(() => runner.status().applied >= events && done()));
  const running = runner.run();
  try {
    await Promise.race([finished, running.then(() => Promise.reject(new Error('the runner stopped before applying every event')))]);
    const seconds = (performance.now() - first) / 1000;
    const { applied, batches } = runner.status();
    return { seconds, events: applied, batches, cpuPerEvent: (cpu() - cpu0) / applied };
  } finally {
    await runner.stop();
    await pool.end();
  }
}

export async function runPlain(postgres: string, kurrentdb: string, schema: string, batch: number, events: number): Promise<ConsumerRun> {
  const client = new pg.Client({ connectionString: postgres });
  await client.connect();
  const kurrent = KurrentDBClient.connectionString(kurrentdb);
  const highWater = Math.max(2 * batch, 256);
  const queue: { amount: number; account: string }[] = [];
  let waiter: (() => void) | null = null;
  let failure: Error | null = null;
  const wake = () => {
    const w = waiter;
    waiter = null;
    w?.();
  };
  const subscription = kurrent.subscribeToAll({ fromPosition: START, filter: streamNameFilter({ prefixes: ['account-'] }) });
  subscription.on('data', (resolved: AllStreamResolvedEvent) => {
    const event = resolved.event;
    if (!event || !event.streamId.startsWith('account-')) return;
    const data = event.data as { account: string; amount: number };
    queue.push({ account: data.account, amount: event.type === 'Withdrawn' ? -data.amount : data.amount });
    if (queue.length >= highWater && !subscription.isPaused()) subscription.pause();
    wake();
  });
  subscription.on('error', (error: Error) => {
    failure = error;
    wake();
  });
  const sql = UPDATE(schema);
  let first = 0;
  let cpu0 = 0;
  let applied = 0;
  let batches = 0;
  try {
    while (applied < events) {
      while (queue.length === 0 && !failure) await new Promise<void>((resolve) => (waiter = resolve));
      if (failure) throw failure;
      const taken = queue.splice(0, batch);
      if (queue.length < highWater / 2 && subscription.isPaused()) subscription.resume();
      if (first === 0) {
        first = performance.now();
        cpu0 = cpu();
      }
      await client.query('BEGIN');
      for (const e of taken) await client.query(sql, [e.amount, e.account]);
      await client.query('COMMIT');
      applied += taken.length;
      batches++;
    }
    return { seconds: (performance.now() - first) / 1000, events: applied, batches, cpuPerEvent: (cpu() - cpu0) / applied };
  } finally {
    await subscription.unsubscribe().catch(() => undefined);
    await kurrent.dispose().catch(() => undefined);
    await client.end();
  }
}
