// Parked events replayed after a fix (replayParked): the handler refuses amounts listed in a
// `faults` table (a fault fixed by deleting its row). Replays run while the runner keeps applying
// new events (both lock the partition's checkpoint row); applied events get receipts and leave the
// parked table, a second replay has no effect, a superseded event stays parked unless
// includeSuperseded, a deleted entity stays deleted, and a handler still failing stays parked with
// one more attempt and the new diagnosis. At the end the balances equal those of a run that never
// failed (increments: a double or missing effect shows).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createProjectionRunner,
  listParkedEvents,
  ProjectionConfigError,
  replayParked,
  storeTables,
  type ParkedReplayOutcome,
  type ProjectionEvent,
  type ProjectionHandler,
  type ProjectionRunner,
  type ReplayParkedOptions,
} from '../../src/consumer/index.js';
import { accountsProjection, createConsumerRig, processed, until, type ConsumerRig, type LedgerEntry, type LedgerEvents } from './consumer-rig.js';

const SCHEMA = 'replaying';
const tables = storeTables();
let rig: ConsumerRig;
let written = 0;
let lsn = 0x10000;
let xid = 9000;

async function write(entries: readonly LedgerEntry[]): Promise<void> {
  lsn += 0x100;
  written += await rig.write(`0/${lsn.toString(16).toUpperCase()}`, ++xid, entries);
}

/** The accounts projection (balances by increments) whose Deposited handler refuses the amounts listed in `faults`. */
function faulty(name = 'accounts_parked') {
  const base = accountsProjection();
  const deposited: ProjectionHandler<'Deposited', LedgerEvents['Deposited']> = async (event, ctx) => {
    const fault = await ctx.client.query<{ reason: string }>(`SELECT reason FROM "${SCHEMA}".faults WHERE amount = $1`, [event.data.amount]);
    if (fault.rows[0]) throw new Error(`refused ${event.data.amount}: ${fault.rows[0].reason}`);
    await base.handlers.Deposited!(event, ctx);
  };
  return accountsProjection({ name, onError: 'park', retry: { attempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, handlers: { ...base.handlers, Deposited: deposited } });
}

const projection = faulty();
let runner: ProjectionRunner;
let running: Promise<void>;
let events: ProjectionEvent[] = [];

function idOf(account: string, amount: number): string {
  const event = events.find((e) => e.type === 'Deposited' && (e.data as { account: string }).account === account && (e.data as { amount: number }).amount === amount);
  if (!event) throw new Error(`no deposit of ${amount} to ${account}`);
  return event.id;
}

function byEvent(outcomes: readonly ParkedReplayOutcome[]): Record<string, string> {
  return Object.fromEntries(outcomes.map((o) => [o.eventId, o.outcome]));
}

/** replayParked on the rig's pool, the projection's tables in SCHEMA. */
function replay(extra: Omit<ReplayParkedOptions, 'projection' | 'postgres' | 'schema'> = {}) {
  return replayParked({ projection, postgres: rig.pool, schema: SCHEMA, ...extra });
}

async function parkedIds(): Promise<string[]> {
  return (await listParkedEvents({ postgres: rig.pool, projection: projection.name })).map((p) => p.eventId);
}

beforeAll(async () => {
  rig = await createConsumerRig('parked');
  await rig.sql(`CREATE SCHEMA ${SCHEMA}`);
  await rig.sql(`CREATE TABLE ${SCHEMA}.faults (amount bigint PRIMARY KEY, reason text NOT NULL)`);
  await rig.sql(`INSERT INTO ${SCHEMA}.faults VALUES (13, 'rate table missing'), (66, 'never fixed')`);
  // a: its 13 is followed by a later deposit (superseded); b: its 13 is its last event; c: its 13
  // is followed by the account's closing (deleted); d: 66 keeps failing; g0…g29: one 13 each.
  await write([{ account: 'a', kind: 'deposit', amount: 10 }, { account: 'b', kind: 'deposit', amount: 5 }, { account: 'c', kind: 'deposit', amount: 7 }]);
  await write([{ account: 'a', kind: 'deposit', amount: 13 }, { account: 'b', kind: 'deposit', amount: 13 }]);
  await write([{ account: 'c', kind: 'deposit', amount: 13 }, { account: 'd', kind: 'deposit', amount: 1 }]);
  await write([{ account: 'a', kind: 'deposit', amount: 20 }, { account: 'c', kind: 'close' }, { account: 'd', kind: 'deposit', amount: 66 }]);
  for (let i = 0; i < 30; i += 3) await write([0, 1, 2].map((k) => ({ account: `g${i + k}`, kind: 'deposit' as const, amount: 13 })));
  runner = createProjectionRunner({ projection, postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: SCHEMA });
  running = runner.run();
  await until(() => expect(processed(runner.status())).toBe(written));
  events = await rig.readAll();
});

afterAll(async () => {
  await runner?.stop();
  await running?.catch(() => undefined);
  await rig?.close();
});

describe('replayParked', () => {
  it('lists the parked events oldest first, with their diagnosis', async () => {
    expect(runner.status()).toMatchObject({ state: 'running', parked: 34 });
    const parked = await listParkedEvents({ postgres: rig.pool, projection: projection.name });
    expect(parked).toHaveLength(34);
    const positions = parked.map((p) => p.position.commit);
    expect(positions).toEqual([...positions].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
    expect(parked[0]).toMatchObject({ eventId: idOf('a', 13), partition: '0/1', stream: 'account-a', type: 'Deposited', attempts: 2, error: { message: 'refused 13: rate table missing' } });
    expect(await listParkedEvents({ postgres: rig.pool, projection: 'no_such_projection' })).toEqual([]);
  });

  it('a replay before the fix fails again: kept parked, one more attempt, the new diagnosis, no effect', async () => {
    await rig.sql(`UPDATE ${SCHEMA}.faults SET reason = 'rate table still missing' WHERE amount = 13`);
    const before = await rig.balances(SCHEMA);
    const result = await replay({ ids: [idOf('b', 13)] });
    expect(result.outcomes).toEqual([expect.objectContaining({ eventId: idOf('b', 13), outcome: 'failed', attempts: 3, cause: { name: 'Error', message: 'refused 13: rate table still missing' } })]);
    expect(result.resolved).toBe(false);
    const [row] = await rig.sql<{ attempts: number; error_message: string }>(`SELECT attempts, error_message FROM ${tables.failedEvents} WHERE event_id = $1`, [idOf('b', 13)]);
    expect(row).toEqual({ attempts: 3, error_message: 'refused 13: rate table still missing' });
    expect(await rig.balances(SCHEMA)).toEqual(before);
  });

  it('refuses ids that are not parked, replaying nothing', async () => {
    const error = await replay({ ids: [idOf('b', 13), idOf('a', 10)] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProjectionConfigError);
    expect((error as ProjectionConfigError).details).toMatchObject({ field: 'ids' });
    expect((error as Error).message).toContain(idOf('a', 10));
    expect(await replay({ ids: ['not-a-uuid'] }).catch((e: unknown) => e)).toBeInstanceOf(ProjectionConfigError);
    expect(await parkedIds()).toHaveLength(34);
  });

  it('after the fix: applied while the runner applies new events; superseded, deleted and still-failing events stay parked', async () => {
    await rig.sql(`DELETE FROM ${SCHEMA}.faults WHERE amount = 13`);
    const progress: number[] = [];
    // New events of other accounts, written while the replay runs: the runner's batches and the
    // replay's transactions take turns on the checkpoint row.
    const writing = (async () => {
      for (let i = 0; i < 15; i++) await write([{ account: `n${i % 4}`, kind: 'deposit', amount: 100 + i }]);
    })();
    const result = await replay({ onProgress: ({ done }) => progress.push(done) });
    await writing;
    await until(() => expect(processed(runner.status())).toBe(written));
    expect(runner.status()).toMatchObject({ state: 'running', error: null, parked: 34 });

    const outcomes = byEvent(result.outcomes);
    expect(outcomes[idOf('a', 13)]).toBe('superseded');
    expect(outcomes[idOf('b', 13)]).toBe('applied');
    expect(outcomes[idOf('c', 13)]).toBe('entityDeleted');
    expect(outcomes[idOf('d', 66)]).toBe('failed');
    for (let i = 0; i < 30; i++) expect(outcomes[idOf(`g${i}`, 13)]).toBe('applied');
    expect(result.totals).toEqual({ selected: 34, applied: 31, alreadyApplied: 0, notParked: 0, superseded: 1, entityDeleted: 1, unhandled: 0, failed: 1 });
    expect(result.resolved).toBe(false);
    expect(progress).toEqual(Array.from({ length: 34 }, (_, i) => i + 1));

    expect(await parkedIds()).toEqual([idOf('a', 13), idOf('c', 13), idOf('d', 66)]);
    const receipts = await rig.sql<{ event_id: string }>(`SELECT event_id::text FROM ${tables.receipts} WHERE projection = $1 AND event_id = ANY($2::uuid[])`, [
      projection.name,
      [idOf('b', 13), idOf('a', 13), idOf('g7', 13)],
    ]);
    expect(receipts.map((r) => r.event_id).sort()).toEqual([idOf('b', 13), idOf('g7', 13)].sort());
    const balances = await rig.balances(SCHEMA);
    expect(balances).toMatchObject({ a: 30, b: 18, d: 1, g0: 13, g29: 13 });
    expect(balances['c']).toBeUndefined();
    // The runner's checkpoint is at the last new event: its batches committed around the replay.
    const [checkpoint] = await rig.sql<{ commit_position: string }>(`SELECT commit_position::text FROM ${tables.checkpoints} WHERE projection = $1`, [projection.name]);
    expect(BigInt(checkpoint!.commit_position)).toBe((await rig.readAll()).at(-1)!.position.commit);
  });

  it('includeSuperseded applies the superseded increment, leaves the entity version; the deleted entity stays deleted', async () => {
    const [versionBefore] = await rig.sql(`SELECT source_lsn::text, event_id::text FROM ${tables.entityVersions} WHERE projection = $1 AND entity_id = 'a'`, [projection.name]);
    const result = await replay({ includeSuperseded: true });
    expect(result.outcomes.map((o) => [o.eventId, o.outcome, o.olderThanEntity])).toEqual([
      [idOf('a', 13), 'applied', true],
      [idOf('c', 13), 'entityDeleted', false],
      [idOf('d', 66), 'failed', false],
    ]);
    expect(result.outcomes[2]!.attempts).toBe(4);
    const [versionAfter] = await rig.sql(`SELECT source_lsn::text, event_id::text FROM ${tables.entityVersions} WHERE projection = $1 AND entity_id = 'a'`, [projection.name]);
    expect(versionAfter).toEqual(versionBefore);
    const [c] = await rig.sql<{ deleted: boolean }>(`SELECT deleted FROM ${tables.entityVersions} WHERE projection = $1 AND entity_id = 'c'`, [projection.name]);
    expect(c!.deleted).toBe(true);
    const balances = await rig.balances(SCHEMA);
    expect(balances['a']).toBe(43);
    expect(balances['c']).toBeUndefined();
    expect(await parkedIds()).toEqual([idOf('c', 13), idOf('d', 66)]);
  });

  it('a second replay has no effect: an event that has a receipt is recognised as already applied', async () => {
    const before = await rig.balances(SCHEMA);
    const [checkpoint] = await rig.sql(`SELECT commit_position::text, prepare_position::text FROM ${tables.checkpoints} WHERE projection = $1`, [projection.name]);
    // b's 13 parked again by hand (as a crash between the effect and dropping its row would leave it).
    const b13 = events.find((e) => e.id === idOf('b', 13))!;
    await rig.sql(
      `INSERT INTO ${tables.failedEvents} (projection, event_id, partition, stream, revision, type, commit_position, prepare_position, data, metadata, error_name, error_message, attempts)
       VALUES ($1, $2, '0/1', $3, $4, $5, $6, $7, $8, $9, 'Error', 'refused 13', 2)`,
      [projection.name, b13.id, b13.stream, b13.revision.toString(), b13.type, b13.position.commit.toString(), b13.position.prepare.toString(), JSON.stringify(b13.data), JSON.stringify(b13.metadata)],
    );
    const result = await replay({ includeSuperseded: true });
    expect(byEvent(result.outcomes)).toEqual({ [idOf('b', 13)]: 'alreadyApplied', [idOf('c', 13)]: 'entityDeleted', [idOf('d', 66)]: 'failed' });
    expect(await rig.balances(SCHEMA)).toEqual(before);
    expect(await parkedIds()).toEqual([idOf('c', 13), idOf('d', 66)]);
    expect(await rig.sql(`SELECT commit_position::text, prepare_position::text FROM ${tables.checkpoints} WHERE projection = $1`, [projection.name])).toEqual([checkpoint]);
  });

  it("waits for the partition's checkpoint row while a batch holds it, as another batch would", async () => {
    const holder = await rig.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${tables.checkpoints} WHERE projection = $1 AND partition = '0/1' FOR UPDATE`, [projection.name]);
      let settled = false;
      const replaying = replay({ ids: [idOf('c', 13)] }).finally(() => (settled = true));
      await until(async () => {
        const waiting = await rig.sql(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%projection_checkpoints%' AND pid <> pg_backend_pid()`);
        expect(waiting).toHaveLength(1);
      });
      expect(settled).toBe(false);
      await holder.query('COMMIT');
      expect((await replaying).totals).toMatchObject({ selected: 1, entityDeleted: 1 });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  });

  it('once the last fault is fixed, the balances equal those of a run that never failed', async () => {
    await rig.sql(`DELETE FROM ${SCHEMA}.faults`);
    const result = await replay({ ids: [idOf('d', 66)] });
    expect(result).toMatchObject({ resolved: true, totals: { selected: 1, applied: 1 } });
    expect(await parkedIds()).toEqual([idOf('c', 13)]);

    // The same events through a projection that never failed.
    await rig.sql('CREATE SCHEMA reference');
    const reference = createProjectionRunner({ projection: accountsProjection({ name: 'accounts_reference' }), postgres: rig.pool, kurrentdb: rig.kdb.connectionString, schema: 'reference' });
    const done = reference.run();
    try {
      await until(() => expect(processed(reference.status())).toBe(written));
    } finally {
      await reference.stop();
    }
    await done;
    expect(reference.status().parked).toBe(0);
    expect(await rig.balances(SCHEMA)).toEqual(await rig.balances('reference'));
  });
});
