// The bad-input corpus (issue 17): `event-assembler run`, as a process, against bad input of
// every kind — configuration, the servers it finds at start-up, transactions it streams. Each
// case must end with a clear error (what is wrong, where, the fix; no stack trace), its exit
// code, and nothing acknowledged past the bad input: the slot's confirmed_flush_lsn not past the
// bad transaction (unchanged when refused before streaming) and none of it in KurrentDB. The
// cases are tables (bad-input-cases.ts, bad-input-config-cases.ts); docs/reliability.md shows them.
//
// Every case has its own table, publication, slot and assembler name, so the cases run side by
// side — CASES_AT_ONCE CLI processes at a time — in one database and one in-memory KurrentDB.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareLsn } from '../../src/source/position.js';
import { CONFIG_CASES, FIELD_ROWS } from './bad-input-config-cases.js';
import { standardSetup, START_UP_CASES, STREAM_CASES, type CorpusCase } from './bad-input-cases.js';
import { createCorpusRig, type CorpusRig, type StoredCaseEvent } from './bad-input-rig.js';
import type { CliProcess } from './pipeline-rig.js';

/** CLI processes at once: most of a case is waiting on servers, and the machine has 2 cores. */
const CASES_AT_ONCE = 4;

// The heaviest cases first, so that the light ones fill in beside them.
const CASES: readonly CorpusCase[] = [...STREAM_CASES, ...START_UP_CASES, ...CONFIG_CASES];
const HEAVY = ['bi_text_50mb', 'bi_wide', 'bi_impure', 'bi_oversized'];
const ORDER = [...CASES].sort((a, b) => rank(a) - rank(b));
function rank(c: CorpusCase): number {
  const heavy = HEAVY.indexOf(c.tag);
  return heavy >= 0 ? heavy : HEAVY.length + (c.stage === 'config' ? 1 : 0);
}

/**
 * A transaction written by the test: an LSN inside it (after its writes, before its commit) and
 * its xid. The slot sends a transaction again unless its confirmed_flush_lsn reached the commit;
 * the commit comes after this LSN, so "confirmed_flush_lsn ≤ lsn" proves it was not acknowledged
 * (stricter than needed by the few bytes in between — never looser).
 */
interface Written {
  readonly lsn: string;
  readonly xid: string;
}

interface Outcome {
  readonly exitCode: number | null | 'timeout';
  readonly code: string | null;
  readonly message: string;
  readonly output: string;
  /** The slot's confirmed_flush_lsn before and after the run. */
  readonly before: string | null;
  readonly after: string | null;
  /** A good transaction written before the run, and the bad one (stage `stream`). */
  readonly pending: Written;
  readonly bad: Written | null;
  readonly events: readonly StoredCaseEvent[];
}

/** Node's stack frames, or the CLI's catch-all for errors without a code. */
const STACK_TRACE = /^\s+at .+:\d+:\d+\)?$|"msg":"unexpected error"/m;

async function write(rig: CorpusRig, statement: string): Promise<Written> {
  const rows = await rig.sql<Written>(`${statement} RETURNING pg_current_wal_insert_lsn()::text AS lsn, (pg_current_xact_id()::text::bigint % 4294967296)::text AS xid`);
  return rows.reduce((a, b) => (compareLsn(a.lsn, b.lsn) >= 0 ? a : b));
}

/** The error the user is shown: the fatal error of a run, or the refusal logged before it could start. */
function diagnosis(cli: CliProcess): { code: string | null; message: string } {
  const lines = cli.lines();
  const fatal = lines.find((l) => l['msg'] === 'assembler stopped after a fatal error')?.['error'] as { code?: string; message?: string } | undefined;
  if (fatal) return { code: fatal.code ?? null, message: fatal.message ?? '' };
  const refused = lines.find((l) => l['level'] === 'error' && typeof l['code'] === 'string');
  return refused ? { code: refused['code'] as string, message: String(refused['msg']) } : { code: null, message: '' };
}

const ofXid = (events: readonly StoredCaseEvent[], written: Written | null): StoredCaseEvent[] => events.filter((e) => written !== null && e.metadata['source.xid'] === written.xid);

/** Waits for `landed` while the CLI runs; returns at once when it exited (its exit code then tells). */
async function whileRunning(rig: CorpusRig, cli: CliProcess, what: string, landed: () => boolean): Promise<void> {
  await rig.until(() => {
    if (cli.child.exitCode !== null) return;
    expect(landed(), what).toBe(true);
  }, 90_000);
}

async function runCase(rig: CorpusRig, c: CorpusCase): Promise<Outcome> {
  await (c.setup ?? standardSetup)(rig, c.tag);
  const pending = await write(rig, `INSERT INTO public.${c.tag} (id, label, amount, at) VALUES ('ok', 'fine', 1.50, '2026-01-02T03:04:05Z')`);
  const before = await rig.confirmedFlushLsn(c.tag);
  const file = typeof c.config === 'function' ? c.config(rig, c.tag) : rig.writeConfig(c.tag, c.config);
  const cli = rig.run(file, c.env?.(rig));
  let bad: Written | null = null;
  try {
    if (c.stage === 'stream') {
      // The line runs up to the bad transaction: the good one before it lands first.
      await whileRunning(rig, cli, `${c.tag}: the transaction before the bad one lands`, () => ofXid(rig.events(c.tag), pending).length > 0);
      if (cli.child.exitCode === null) bad = await write(rig, c.bad!(c.tag));
      if (c.expected === 'handled') {
        const written = bad;
        await whileRunning(rig, cli, `${c.tag}: the transaction lands`, () => ofXid(rig.events(c.tag), written).length > 0);
        cli.child.kill('SIGTERM');
      }
    }
    const exitCode = await cli.exit(90_000);
    const after = await rig.confirmedFlushLsn(c.tag);
    return { exitCode, ...diagnosis(cli), output: cli.output(), before, after, pending, bad, events: rig.events(c.tag) };
  } finally {
    if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
    await rig.dropSlot(c.tag).catch(() => undefined);
  }
}

/** Runs `run` over `items`, `size` at a time, in order. */
async function inBatches<T>(items: readonly T[], size: number, run: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const worker = async (): Promise<void> => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await run(item);
  };
  await Promise.all(Array.from({ length: size }, worker));
}

describe('bad-input corpus: event-assembler run against bad input', () => {
  let rig: CorpusRig;
  const outcomes = new Map<string, Outcome | { failed: unknown }>();

  beforeAll(async () => {
    rig = await createCorpusRig();
    await inBatches(ORDER, CASES_AT_ONCE, async (c) => {
      outcomes.set(c.tag, await runCase(rig, c).catch((failed: unknown) => ({ failed })));
    });
  }, 180_000);
  afterAll(async () => {
    await rig?.close();
  });

  function outcomeOf(tag: string): Outcome {
    const outcome = outcomes.get(tag);
    if (!outcome) throw new Error(`case ${tag} did not run`);
    if ('failed' in outcome) throw outcome.failed;
    return outcome;
  }

  it('has at least 25 cases, each with its own tag', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(25);
    expect(new Set(CASES.map((c) => c.tag)).size).toBe(CASES.length);
  });

  it.each(CASES.map((c) => [`${c.stage}: ${c.name}`, c] as const))('%s', (_title, c) => {
    const o = outcomeOf(c.tag);
    const shown = `exit ${String(o.exitCode)}, ${o.code ?? 'no code'}: ${o.message}\n--- output ---\n${o.output.slice(0, 4_000)}`;
    expect(o.output, shown).not.toMatch(STACK_TRACE);
    if (c.expected === 'handled') {
      expect(o.exitCode, shown).toBe(0);
      // It landed once — without the column no mapper allowlists — and is acknowledged.
      const landed = ofXid(o.events, o.bad);
      expect(landed.map((e) => e.type)).toEqual(['ItemAdded']);
      expect(Object.keys(landed[0]!.data).sort()).toEqual(['amount', 'at', 'id', 'label']);
      expect(compareLsn(o.after!, o.bad!.lsn)).toBeGreaterThan(0);
      return;
    }
    const expected = c.expected;
    expect({ exitCode: o.exitCode, code: o.code }, shown).toEqual({ exitCode: expected.exitCode, code: expected.code });
    expect(o.message, 'what is wrong').toMatch(expected.what);
    expect(o.message, 'where').toMatch(expected.where);
    expect(o.message, 'the fix').toMatch(expected.fix);
    if (c.stage === 'stream') {
      // Not acknowledged past the bad transaction, none of it appended; the message's xid is its own.
      expect(compareLsn(o.after!, o.bad!.lsn), `confirmed_flush_lsn ${o.after} past ${o.bad!.lsn}`).toBeLessThanOrEqual(0);
      expect(ofXid(o.events, o.bad)).toEqual([]);
      const xid = /xid (\d+)/.exec(o.message)?.[1];
      if (xid !== undefined) expect(xid).toBe(o.bad!.xid);
    } else {
      // Refused before streaming: the slot did not move, and nothing was appended.
      expect(o.after).toBe(o.before);
      expect(o.events).toEqual([]);
    }
  });

  it.each(FIELD_ROWS.map((row) => [row.field, row] as const))('config field %s: its own line says what is wrong and the fix', (_field, row) => {
    const { message } = outcomeOf('bi_config_all');
    const line = message.split('\n').find((l) => l.startsWith(`  - ${row.field}: `));
    expect(line, `no line for ${row.field} in:\n${message}`).toBeDefined();
    const [problem, fix] = line!.slice(`  - ${row.field}: `.length).split(' — fix: ');
    expect(problem).toMatch(row.problem);
    expect(fix).toMatch(row.fix);
  });
});
