// Generations: a rebuild loads generation N+1 beside N, validates it and switches readers' views
// in one transaction — readers querying in a loop see N's total until the switch and N+1's after,
// never a half-built generation and never an error; a disagreeing sample or count fails the switch
// and N keeps serving; rollback serves N again; N's runner advances under its own checkpoint rows
// while N+1 builds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import {
  createProjectionRunner,
  listGenerations,
  ProjectionGenerationError,
  ProjectionValidationError,
  rebuildProjection,
  rollbackProjection,
  storeTables,
  type AllPosition,
  type ProjectionRow,
  type RebuildValidation,
} from '../../src/consumer/index.js';
import { accountsProjection, createConsumerRig, processed, until, type ConsumerRig, type LedgerEntry } from './consumer-rig.js';

let rig: ConsumerRig;
/** The source: each live account's balance, as the ledger rows written so far make it. */
const source: Record<string, number> = {};
let lsn = 0x1000;
let xid = 7000;
let written = 0;

async function write(entries: LedgerEntry[]): Promise<void> {
  lsn += 0x100;
  written += await rig.write(`0/${lsn.toString(16).toUpperCase()}`, ++xid, entries);
  for (const e of entries) {
    if (e.kind === 'close') delete source[e.account];
    else source[e.account] = (source[e.account] ?? 0) + (e.amount ?? 0);
  }
}

async function deposits(count: number, amount: number): Promise<void> {
  for (let i = 0; i < count; i++) await write([{ account: `c${i % 6}`, kind: 'deposit', amount: amount + i }]);
}

const sum = () => Object.values(source).reduce((a, b) => a + b, 0);
const projection = accountsProjection();
const options = () => ({ projection, postgres: rig.pool, kurrentdb: rig.kdb.connectionString });

/** Compares each sampled row with the source (`lie` makes the source disagree on one account). */
function validation(lie?: string): RebuildValidation {
  const snapshot = { ...source };
  return {
    table: 'accounts',
    sample: 100,
    source: ({ id }) => (id in snapshot ? { id, balance: snapshot[id]! + (id === lie ? 1 : 0) } : null),
    check: (row: ProjectionRow, src) => (Number(row['balance']) === src?.['balance'] ? undefined : `balance ${String(row['balance'])}, source ${String(src?.['balance'])}`),
  };
}

/** A reader querying the readers' view in a loop, recording every total and every error. */
function readerLoop(pool: pg.Pool) {
  const totals: number[] = [];
  const errors: unknown[] = [];
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      try {
        const result = await pool.query<{ total: string }>('SELECT coalesce(sum(balance), 0)::text AS total FROM accounts.accounts');
        totals.push(Number(result.rows[0]!.total));
      } catch (error) {
        errors.push(error);
      }
    }
  })();
  return {
    totals,
    errors,
    async stop() {
      stopped = true;
      await done;
    },
  };
}

async function servingState(): Promise<Record<number, string>> {
  return Object.fromEntries((await listGenerations({ postgres: rig.pool, projection: 'accounts' })).map((g) => [g.generation, g.state]));
}

beforeAll(async () => {
  rig = await createConsumerRig('generations');
  await deposits(30, 10);
});
afterAll(async () => {
  await rig?.close();
});

describe('generations, rebuild, switch and rollback', () => {
  let t1 = 0;
  let t2 = 0;

  it('the first rebuild makes generation 1, validates it and serves it in schema "accounts"', async () => {
    const result = await rebuildProjection({ ...options(), validate: validation() });
    t1 = sum();
    expect(result).toMatchObject({ generation: 1, previous: null, readerSchema: 'accounts', events: { read: written, applied: written, parked: 0 }, validation: { entities: 6, rows: 6, sampled: 6 } });
    expect(await rig.balances('accounts')).toEqual(source);
    expect(await rig.balances('accounts_g1')).toEqual(source);
    expect(await servingState()).toEqual({ 1: 'serving' });
  });

  it('rebuild while readers query in a loop: N until the switch, N+1 after, never a half-built one, no error', async () => {
    await deposits(40, 1000);
    await write([{ account: 'c1', kind: 'close' }]);
    t2 = sum();
    expect(t2).not.toBe(t1);
    const readers = [readerLoop(rig.pool), readerLoop(rig.pool)];
    await until(() => expect(Math.min(...readers.map((r) => r.totals.length))).toBeGreaterThanOrEqual(5));
    // Halfway through the load, the new generation's table holds part of its rows: readers keep
    // reading (N's total) while it does.
    let calls = 0;
    let halfBuilt: number | null = null;
    let readsWhileHalfBuilt: number[] = [];
    const base = accountsProjection();
    const slowed = accountsProjection({
      handlers: {
        ...base.handlers,
        Deposited: async (event, ctx) => {
          await base.handlers.Deposited!(event, ctx);
          if (++calls !== 35) return;
          const partial = await ctx.client.query<{ total: string }>(`SELECT coalesce(sum(balance), 0)::text AS total FROM "${ctx.schema}".accounts`);
          halfBuilt = Number(partial.rows[0]!.total);
          const from = readers.map((r) => r.totals.length);
          await until(() => expect(readers.every((r, i) => r.totals.length >= from[i]! + 3)).toBe(true));
          readsWhileHalfBuilt = readers.flatMap((r, i) => r.totals.slice(from[i]));
        },
      },
    });
    const result = await rebuildProjection({ ...options(), projection: slowed, validate: validation() });
    const atSwitch = readers.map((r) => r.totals.length);
    await until(() => expect(readers.every((r, i) => r.totals.length >= atSwitch[i]! + 5)).toBe(true));
    await Promise.all(readers.map((r) => r.stop()));

    expect(result).toMatchObject({ generation: 2, previous: 1, validation: { entities: 5, rows: 5, sampled: 5 } });
    expect(halfBuilt).not.toBeNull();
    expect([t1, t2]).not.toContain(halfBuilt);
    expect(new Set(readsWhileHalfBuilt)).toEqual(new Set([t1]));
    for (const reader of readers) {
      expect(reader.errors).toEqual([]);
      expect(new Set(reader.totals)).toEqual(new Set([t1, t2]));
      // N then N+1: once a reader saw N+1 it never sees N again.
      const firstNew = reader.totals.indexOf(t2);
      expect(reader.totals.slice(0, firstNew).every((t) => t === t1)).toBe(true);
      expect(reader.totals.slice(firstNew).every((t) => t === t2)).toBe(true);
    }
    expect(await rig.balances('accounts')).toEqual(source);
    expect(await servingState()).toEqual({ 1: 'standby', 2: 'serving' });
  });

  it('a sampled record that disagrees fails the switch: the error names it, N keeps serving', async () => {
    await deposits(6, 5);
    const readers = [readerLoop(rig.pool)];
    const failure = await rebuildProjection({ ...options(), validate: validation('c3') }).catch((error: unknown) => error);
    const after = readers[0]!.totals.length;
    await until(() => expect(readers[0]!.totals.length).toBeGreaterThanOrEqual(after + 3));
    await readers[0]!.stop();
    expect(failure).toBeInstanceOf(ProjectionValidationError);
    const details = (failure as ProjectionValidationError).details;
    expect(details).toMatchObject({ projection: 'accounts', generation: 3, serving: 2, check: 'sample', entity: { type: 'account', id: 'c3' } });
    expect(details.difference).toBe(`balance ${source['c3']}, source ${source['c3']! + 1}`);
    expect((failure as Error).message).toMatch(/generation 3 failed validation \(sample check, entity account\/c3\).*generation 2 keeps serving/);
    expect(readers[0]!.errors).toEqual([]);
    expect(new Set(readers[0]!.totals)).toEqual(new Set([t2]));
    expect(await servingState()).toEqual({ 1: 'standby', 2: 'serving', 3: 'failed' });
    // A failed generation takes no runner.
    const runner = createProjectionRunner({ ...options(), generation: 3 });
    await expect(runner.run()).rejects.toThrow(ProjectionGenerationError);
  });

  it('rows that do not match the live entities fail the count check', async () => {
    const base = accountsProjection();
    const forgetful = accountsProjection({
      handlers: { ...base.handlers, Deposited: (event, ctx) => (event.data.account === 'c5' ? undefined : base.handlers.Deposited!(event, ctx)) },
    });
    const failure = await rebuildProjection({ ...options(), projection: forgetful, validate: { table: 'accounts' } }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ProjectionValidationError);
    // Account c1 was closed, then re-created by later deposits: all six live.
    const live = Object.keys(source).length;
    expect(live).toBe(6);
    expect((failure as ProjectionValidationError).details).toMatchObject({ generation: 4, check: 'count', difference: `table accounts has ${live - 1} row(s), the events read leave ${live} live entities` });
    expect((await servingState())[2]).toBe('serving');
  });

  it('rollback serves N again; rolling back past the first generation is refused', async () => {
    expect(await rollbackProjection({ postgres: rig.pool, projection: 'accounts' })).toEqual({ projection: 'accounts', generation: 1, from: 2 });
    expect(Object.values(await rig.balances('accounts')).reduce((a, b) => a + b, 0)).toBe(t1);
    expect(await servingState()).toMatchObject({ 1: 'serving', 2: 'standby' });
    await expect(rollbackProjection({ postgres: rig.pool, projection: 'accounts' })).rejects.toThrow(/no generation served before it/);
    await expect(rollbackProjection({ postgres: rig.pool, projection: 'accounts', to: 3 })).rejects.toThrow(/is failed/);
    expect(await rollbackProjection({ postgres: rig.pool, projection: 'accounts', to: 2 })).toMatchObject({ generation: 2, from: 1 });
    expect(Object.values(await rig.balances('accounts')).reduce((a, b) => a + b, 0)).toBe(t2);
  });

  it('N advances under its own checkpoint rows while N+1 builds to a given freshness point', async () => {
    // Generation 2 catches up with what was written since it was loaded, then keeps running.
    const live = createProjectionRunner({ ...options(), generation: 2 });
    const running = live.run();
    try {
      await until(async () => expect(await rig.balances('accounts_g2')).toEqual(source));
      const freshness: AllPosition = (await rig.readAll()).at(-1)!.position;
      const atFreshness = { ...source };
      await deposits(6, 50_000);
      const rebuilt = await rebuildProjection({ ...options(), to: freshness, validate: { table: 'accounts', sample: 3, source: ({ id }) => ({ balance: atFreshness[id] }), check: (row, src) => (Number(row['balance']) === src?.['balance'] ? null : 'differs') } });
      expect(rebuilt).toMatchObject({ generation: 5, previous: 2, position: freshness });
      await until(async () => expect(await rig.balances('accounts_g2')).toEqual(source));
      expect(await rig.balances('accounts')).toEqual(atFreshness);
      const checkpoints = await rig.sql<{ projection: string; commit: string }>(`SELECT projection, commit_position::text AS commit FROM ${storeTables().checkpoints} WHERE projection LIKE 'accounts@g%' ORDER BY projection`);
      const last = (await rig.readAll()).at(-1)!.position;
      expect(checkpoints).toEqual(
        expect.arrayContaining([
          { projection: 'accounts@g2', commit: last.commit.toString() },
          { projection: 'accounts@g5', commit: freshness.commit.toString() },
        ]),
      );
      expect(processed(live.status())).toBeGreaterThan(0);
    } finally {
      await live.stop();
      await running;
    }
    // A runner on the new serving generation takes it from the freshness point to the head.
    const next = createProjectionRunner({ ...options(), generation: 5 });
    const nextRun = next.run();
    try {
      await until(async () => expect(await rig.balances('accounts')).toEqual(source));
    } finally {
      await next.stop();
      await nextRun;
    }
  });
});
