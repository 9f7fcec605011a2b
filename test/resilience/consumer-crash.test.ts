// Consumer crash test: a projection with non-idempotent effects (balances by increments, plus an
// append-only log of applied events with no unique key) runs in a child process
// (test/support/consumer-child.ts) and is killed with SIGKILL again and again while a live
// workload writes ledger transactions to KurrentDB through the real sink; each time a new child
// starts from the checkpoint. After the last start has reached the head of `$all`, the projection
// is compared with the source history (the events in KurrentDB, and the workload's own model):
// every account's balance = the sum of its deposits minus its withdrawals, no event applied twice
// (duplicates in the log), none missing, none extra, each stream applied in revision order.
//
// Two kinds of kill, in a seeded order:
// - between effect and checkpoint: the child is started with EA_CONSUMER_PAUSE_AT=N and, after the
//   N-th event's effects — inside the batch's PostgreSQL transaction, before the receipts and the
//   checkpoint's compare-and-set — prints `paused` and waits; the kill lands there deterministically.
//   Checked: the backend was idle in that transaction, the paused event's effect was rolled back
//   with the process, and in the end it is applied exactly once (by a later child).
// - random: once the child has committed N events (seeded), it is frozen (SIGSTOP), its backend's
//   state read (pg_stat_activity: which step of a batch it was in), then killed. The windows hit
//   are counted and printed.
//
// PostgreSQL (the run's shared server) and the in-memory KurrentDB live in this process and
// survive the kills. Scale: EA_CONSUMER_KILLS (default 10), EA_CONSUMER_EFFECT_KILLS (of those,
// between effect and checkpoint; default ⌈40 %⌉), EA_CONSUMER_SEED (default: time-based; printed,
// so a failing run can be repeated — the kill plan and the workload's content follow from it; the
// timing does not), EA_CONSUMER_RATE (workload transactions per second, default 100). The workload
// comes in rounds, one per child: 60–120 transactions (seeded) let through as the child is spawned,
// written at that rate while it starts and runs, and after its death while the next one starts.
//
// Each child runs in the batch or the transaction-atomic mode (seeded); the atomic children's
// events of one source transaction must have committed in one PostgreSQL transaction.
//
// Negative control: EA_CONSUMER_NEGATIVE_CONTROL=1 makes the child write its log rows outside the
// batch's transaction (an effect the kit cannot undo); this test must then fail with events applied
// twice (seed 11: 42 duplicates, 0/4 paused effects rolled back).
import { KurrentDBClient, FORWARDS, START } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPrng } from '../../examples/invoicing/workload.js';
import { recordedInput, storeTables, toProjectionEvent } from '../../src/consumer/index.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { backendGone, settledBackend, windowOf, type KillWindow } from '../support/consumer-backend.js';
import { LEDGER_PROJECTION } from '../support/consumer-ledger.js';
import { createLedgerWriter, type LedgerWriter } from '../support/consumer-ledger-writer.js';
import { startConsumerProcess, type ChildMessage, type ConsumerProcess } from '../support/consumer-process.js';
import { startLedgerWorkload } from '../support/consumer-workload.js';

const KILLS = Number(process.env.EA_CONSUMER_KILLS ?? 10);
const EFFECT_KILLS = Math.min(KILLS, Number(process.env.EA_CONSUMER_EFFECT_KILLS ?? Math.ceil(KILLS * 0.4)));
const SEED = Number(process.env.EA_CONSUMER_SEED ?? Date.now() % 2_147_483_647);
const RATE = Number(process.env.EA_CONSUMER_RATE ?? 100);
const ACCOUNTS = 20;
/** Transactions written before the first start: a backlog for the first child. */
const FIRST_ROUND = 100;
/** Transactions of the last round, written while the last child follows the workload. */
const LAST_ROUND = 60;
const CHECKPOINTS = storeTables().checkpoints;

type KillKind = 'effect-before-checkpoint' | 'random';

interface KillRecord {
  readonly n: number;
  readonly kind: KillKind;
  /** effect kills: the N-th effect of the child; random kills: events committed by the child before the kill. */
  readonly target: number;
  readonly window: KillWindow;
  readonly committedByChild: number;
  /** effect kills: the paused event, and whether its effect was gone after the kill (rolled back). */
  readonly pausedEvent?: string;
  readonly rolledBack?: boolean;
  readonly query: string;
  /** Milliseconds from the spawn to the child's first line (Node + tsx start-up), and to the kill. */
  readonly startupMs: number;
  readonly killedAfterMs: number;
}

interface SourceEvent {
  readonly id: string;
  readonly stream: string;
  readonly revision: bigint;
  readonly account: string;
  readonly signed: number;
  readonly commit: bigint;
}

function planKills(random: () => number): { kind: KillKind; target: number; round: number; atomic: boolean }[] {
  const kinds: KillKind[] = Array.from({ length: KILLS }, (_, i) => (i < EFFECT_KILLS ? 'effect-before-checkpoint' : 'random'));
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  // Effect kills: the 1st–40th effect of the child (the first batch or a later one, any place in a
  // batch of 10). Random kills: after 1–60 committed events (during the catch-up of what was
  // written while the previous child was down, or once it follows the live workload). A round
  // (≥ 60 transactions, ≥ 60 events) makes either reachable.
  // Each child runs in the batch or the transaction-atomic mode (seeded): a switch between children
  // starts the atomic mode from a checkpoint the batch mode may have left inside a transaction.
  return kinds.map((kind) => ({ kind, target: 1 + Math.floor(random() * (kind === 'random' ? 60 : 40)), round: 60 + Math.floor(random() * 61), atomic: random() < 0.5 }));
}

async function readSource(kurrentdb: string): Promise<SourceEvent[]> {
  const client = KurrentDBClient.connectionString(kurrentdb);
  const out: SourceEvent[] = [];
  try {
    for await (const resolved of client.readAll({ fromPosition: START, direction: FORWARDS })) {
      const input = recordedInput(resolved);
      if (!input || !input.stream.startsWith('account-')) continue;
      const event = toProjectionEvent(input) as ReturnType<typeof toProjectionEvent> & { data: { account: string; amount: number } };
      out.push({ id: event.id, stream: event.stream, revision: event.revision, account: event.data.account, signed: event.type === 'Withdrawn' ? -event.data.amount : event.data.amount, commit: event.position.commit });
    }
  } finally {
    await client.dispose();
  }
  return out;
}

describe('the consumer survives SIGKILL at random points, between effect and checkpoint included (child process, live workload)', () => {
  let db: TestDatabase;
  let kdb: InMemoryKurrentDB;
  let pool: pg.Pool;
  let writer: LedgerWriter;

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'consumer_crash');
    kdb = await startInMemoryKurrentDB();
    pool = new pg.Pool({ connectionString: db.connectionString, max: 3 });
    writer = await createLedgerWriter(kdb.connectionString);
    console.log(`consumer crash test: seed ${SEED} (EA_CONSUMER_SEED=${SEED} repeats it), ${KILLS} kills (${EFFECT_KILLS} between effect and checkpoint), ${RATE} transactions/s`);
  });

  afterAll(async () => {
    await writer?.close().catch(() => undefined);
    await pool?.end().catch(() => undefined);
    await kdb?.close().catch(() => undefined);
    await db?.drop();
  });

  it(`no double effect and nothing missed after ${KILLS} kills, checked against the source`, { timeout: 300_000 }, async () => {
    const started = Date.now();
    const random = createPrng(SEED);
    const plan = planKills(random);
    const workload = startLedgerWorkload(writer, { seed: SEED + 1, accounts: ACCOUNTS, transactionsPerSecond: RATE });
    const children = new Set<ConsumerProcess>();
    const kills: KillRecord[] = [];
    const kurrentdb = `${kdb.connectionString}&discoveryInterval=50`;
    let starts = 0;
    const start = (atomic: boolean, pauseAt?: number) => {
      const applicationName = `consumer-crash-${++starts}`;
      const url = new URL(db.connectionString);
      url.searchParams.set('application_name', applicationName);
      const env: Record<string, string> = { EA_CONSUMER_POSTGRES: url.toString(), EA_CONSUMER_KURRENTDB: kurrentdb };
      if (pauseAt !== undefined) env['EA_CONSUMER_PAUSE_AT'] = String(pauseAt);
      if (atomic) env['EA_CONSUMER_ATOMIC'] = 'transaction';
      const proc = startConsumerProcess(env);
      children.add(proc);
      return { proc, applicationName };
    };
    const committedBy = async (pid: number) => Number((await pool.query(`SELECT count(*) AS n FROM public.applied_events WHERE pid = $1`, [pid]).catch(() => ({ rows: [{ n: 0 }] }))).rows[0].n);

    try {
      workload.addRound(FIRST_ROUND);
      await workload.written();
      for (const [i, { kind, target, round, atomic }] of plan.entries()) {
        workload.addRound(round);
        const spawned = Date.now();
        const { proc, applicationName } = start(atomic, kind === 'effect-before-checkpoint' ? target : undefined);
        let startupMs = -1;
        void proc.waitForMessage((m) => m.event === 'started', 60_000).then(() => (startupMs = Date.now() - spawned), () => undefined);
        let record: KillRecord;
        if (kind === 'effect-before-checkpoint') {
          const paused: ChildMessage = await proc.waitForMessage((m) => m.event === 'paused', 30_000);
          const view = await settledBackend(pool, applicationName);
          await proc.kill('SIGKILL');
          const killedAfterMs = Date.now() - spawned;
          await backendGone(pool, applicationName);
          const left = await pool.query(`SELECT count(*)::int AS n FROM public.applied_events WHERE event_id = $1`, [paused['id']]);
          record = { n: i + 1, kind, target, window: windowOf(view), committedByChild: await committedBy(proc.pid), pausedEvent: String(paused['id']), rolledBack: left.rows[0].n === 0, query: view?.query.slice(0, 60) ?? '', startupMs, killedAfterMs };
          expect(view, `kill ${i + 1}: the paused child's backend`).toMatchObject({ state: 'idle in transaction', inTransaction: true });
        } else {
          const deadline = Date.now() + 30_000;
          while ((await committedBy(proc.pid)) < target) {
            if (!proc.running) throw new Error(`kill ${i + 1}: the child exited before the kill\n${proc.stderrTail()}`);
            if (Date.now() > deadline) throw new Error(`kill ${i + 1}: the child did not commit ${target} events within 30 s\n${proc.stderrTail()}`);
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
          process.kill(proc.pid, 'SIGSTOP');
          const view = await settledBackend(pool, applicationName);
          await proc.kill('SIGKILL');
          const killedAfterMs = Date.now() - spawned;
          await backendGone(pool, applicationName);
          record = { n: i + 1, kind, target, window: windowOf(view), committedByChild: await committedBy(proc.pid), query: view?.query.replace(/\s+/g, ' ').slice(0, 60) ?? '', startupMs, killedAfterMs };
        }
        const exit = await proc.exited;
        expect(exit.signal, `kill ${i + 1}: the child died of something else\n${proc.stderrTail()}`).toBe('SIGKILL');
        children.delete(proc);
        kills.push(record);
      }

      // The last round: a last child follows the workload, which then stops; it runs to the head.
      workload.addRound(LAST_ROUND);
      const lastStarted = Date.now();
      const lastAtomic = random() < 0.5;
      const last = start(lastAtomic);
      await workload.written();
      await workload.stop();
      const source = await readSource(kdb.connectionString);
      const head = source.at(-1)!.commit;
      const headDeadline = Date.now() + 60_000;
      for (;;) {
        const { rows } = await pool.query(`SELECT commit_position::text AS commit FROM ${CHECKPOINTS} WHERE projection = $1`, [LEDGER_PROJECTION]);
        if (rows[0]?.commit && BigInt(rows[0].commit) >= head) break;
        if (!last.proc.running) throw new Error(`the last child exited before the head\n${last.proc.stderrTail()}`);
        if (Date.now() > headDeadline) throw new Error(`the last child did not reach the head (${head}) within 60 s: checkpoint ${rows[0]?.commit}\n${last.proc.stderrTail()}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const lastRunMs = Date.now() - lastStarted;
      const stopped = last.proc.waitForMessage((m) => m.event === 'stopped', 30_000);
      const exit = await last.proc.kill('SIGTERM');
      await stopped;
      expect(exit, `the last child did not stop cleanly\n${last.proc.stderrTail()}`).toEqual({ code: 0, signal: null });
      children.delete(last.proc);

      // ── against the source ──
      const expected: Record<string, number> = {};
      for (const e of source) expected[e.account] = (expected[e.account] ?? 0) + e.signed;
      const balances = Object.fromEntries(
        (await pool.query<{ account: string; balance: string }>(`SELECT account, balance::text FROM public.balances`)).rows.map((r) => [r.account, Number(r.balance)]),
      );
      const applied = (await pool.query<{ event_id: string; stream: string; revision: string; pid: number }>(`SELECT event_id, stream, revision::text, pid FROM public.applied_events ORDER BY seq`)).rows;
      // The atomic mode's children: each source transaction's events they applied, in one PostgreSQL transaction.
      const split = (
        await pool.query<{ unit: string; txs: string }>(`SELECT unit, count(DISTINCT tx)::text AS txs FROM public.applied_events WHERE atomic GROUP BY unit HAVING count(DISTINCT tx) > 1`)
      ).rows;
      const atomicRows = Number((await pool.query(`SELECT count(*) AS n FROM public.applied_events WHERE atomic`)).rows[0].n);
      const atomicChildren = plan.filter((p) => p.atomic).length + (lastAtomic ? 1 : 0);
      const counts = new Map<string, number>();
      for (const row of applied) counts.set(row.event_id, (counts.get(row.event_id) ?? 0) + 1);
      const sourceIds = new Set(source.map((e) => e.id));
      const duplicates = [...counts].filter(([, n]) => n > 1);
      const missing = source.filter((e) => !counts.has(e.id));
      const extra = [...counts.keys()].filter((id) => !sourceIds.has(id));
      const lastRevision = new Map<string, bigint>();
      let outOfOrder = 0;
      for (const row of applied) {
        const revision = BigInt(row.revision);
        if ((lastRevision.get(row.stream) ?? -1n) >= revision) outOfOrder++;
        lastRevision.set(row.stream, revision);
      }
      const receipts = Number((await pool.query(`SELECT count(*) AS n FROM event_assembler.projection_receipts WHERE projection = $1`, [LEDGER_PROJECTION])).rows[0].n);
      const windows = new Map<string, number>();
      for (const k of kills) windows.set(k.window, (windows.get(k.window) ?? 0) + 1);
      const effectKills = kills.filter((k) => k.kind === 'effect-before-checkpoint');
      const match = Object.keys(expected).length === Object.keys(balances).length && Object.keys(expected).every((a) => balances[a] === expected[a]);
      const seconds = ((Date.now() - started) / 1000).toFixed(1);

      console.log(
        [
          `consumer crash test, seed ${SEED}: ${workload.transactions} source transactions, ${source.length} events on ${Object.keys(expected).length} accounts in ${workload.rounds.length} rounds ` +
            `(${workload.rounds.join('/')} transactions) at ${RATE}/s; ${kills.length} SIGKILLs, ${starts} child starts; windows: ${[...windows].map(([w, n]) => `${n} ${w}`).join(', ')}; ` +
            `${effectKills.filter((k) => k.rolledBack).length}/${effectKills.length} paused effects rolled back; duplicates ${duplicates.length}, missing ${missing.length}, extra ${extra.length}, ` +
            `out of order ${outOfOrder}, receipts ${receipts}; ${atomicChildren}/${starts} children in the atomic mode applied ${atomicRows} events, transactions split ${split.length}; last child to the head in ${(lastRunMs / 1000).toFixed(1)} s; balances ${match ? 'match' : 'DIFFER from'} the source; ${seconds} s`,
          ...kills.map((k) => `  kill ${String(k.n).padStart(2)} ${k.kind.padEnd(24)} target ${String(k.target).padStart(3)}, started in ${k.startupMs} ms, killed at ${k.killedAfterMs} ms: ${k.committedByChild} events committed by the child; ${k.window}${k.pausedEvent ? ` (paused on ${k.pausedEvent}, effect ${k.rolledBack ? 'rolled back' : 'STILL THERE'})` : ''} [${k.query}]`),
        ].join('\n'),
      );

      expect(kills).toHaveLength(KILLS);
      expect(duplicates, `events applied more than once (seed ${SEED})`).toEqual([]);
      expect(missing.map((e) => e.id), `events never applied (seed ${SEED})`).toEqual([]);
      expect(extra, 'applied events that are not in the source').toEqual([]);
      expect(outOfOrder, 'events applied out of revision order within a stream').toBe(0);
      expect(split, 'source transactions an atomic-mode child applied in more than one PostgreSQL transaction').toEqual([]);
      expect(receipts).toBe(source.length);
      expect(balances, `balances against the events in KurrentDB (seed ${SEED})`).toEqual(expected);
      expect(expected, 'the events in KurrentDB against the workload written').toEqual(workload.model);
      expect(source.length).toBe(workload.events);
      for (const k of effectKills) {
        expect(k.window, `kill ${k.n}`).toBe('between effect and checkpoint');
        expect(k.rolledBack, `kill ${k.n}: the paused event's effect survived the kill`).toBe(true);
        expect(counts.get(k.pausedEvent!), `kill ${k.n}: the paused event ${k.pausedEvent}`).toBe(1);
      }
    } finally {
      await workload.stop().catch(() => undefined);
      for (const proc of children) await proc.kill('SIGKILL');
    }
  });
});
