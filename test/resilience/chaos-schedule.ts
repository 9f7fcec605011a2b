// The chaos run's faults: a seeded schedule (the same seed, the same faults in the same order
// with the same pauses and parameters) and how each is done to the rig.
//
// | fault | what is done | the assembler |
// |---|---|---|
// | `kill` | SIGKILL of the assembler process, then a new one started | restarts from its checkpoint |
// | `pg-fast` | PostgreSQL fast shutdown (SIGINT, `pg_ctl -m fast`), started again on the same data directory and port | left running: must reconnect |
// | `pg-immediate` | SIGKILL of the postmaster (its children exit: an immediate shutdown without the courtesy), crash recovery on start | left running: must reconnect |
// | `outage` | KurrentDB stopped (connections dropped) for a while, then restarted with its data — and without its weak-idempotency cache (`any` appends forgotten), as a real restart | waits it out |
// | `slow` | every append held for a while (per-append latency) for a period | keeps going, slower |
//
// After each fault the run waits until the destination grows again (the assembler recovered)
// before the next pause begins: faults do not pile up unobserved.
import type { SnapshotProgress } from '../../src/source/snapshot/index.js';
import { waitFor } from './assembler-process.js';
import type { ChaosRig, StartDecision } from './chaos-rig.js';

export type ChaosKind = 'kill' | 'pg-fast' | 'pg-immediate' | 'outage' | 'slow';

export interface ChaosAction {
  readonly kind: ChaosKind;
  /** Pause before the fault. */
  readonly delayMs: number;
  /** outage / slow: how long it lasts. */
  readonly durationMs: number;
  /** slow: the per-append latency. */
  readonly latencyMs: number;
}

export interface ChaosTally {
  kills: number;
  /** Kills that found the snapshot unfinished (and the next start resumed it). */
  midSnapshotKills: number;
  pgFast: number;
  pgImmediate: number;
  /** PostgreSQL restarts while the snapshot was unfinished. */
  pgMidSnapshot: number;
  /** PostgreSQL restarts the running assembler noticed (logged) and lived through. */
  pgNoticed: number;
  outages: number;
  slowPeriods: number;
  /** One line per fault, for the log and a failure message. */
  readonly lines: string[];
}

export const emptyTally = (): ChaosTally => ({ kills: 0, midSnapshotKills: 0, pgFast: 0, pgImmediate: 0, pgMidSnapshot: 0, pgNoticed: 0, outages: 0, slowPeriods: 0, lines: [] });

/** Every kind in each round, shuffled; two kills per round. */
export function planSchedule(rounds: number, random: () => number): ChaosAction[] {
  const actions: ChaosAction[] = [];
  for (let r = 0; r < rounds; r++) {
    const bag: ChaosKind[] = ['kill', 'pg-fast', 'pg-immediate', 'outage', 'slow', 'kill'];
    for (let i = bag.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [bag[i], bag[j]] = [bag[j]!, bag[i]!];
    }
    for (const kind of bag) {
      actions.push({ kind, delayMs: Math.round(800 + random() * 2_200), durationMs: Math.round(800 + random() * 2_700), latencyMs: Math.round(20 + random() * 130) });
    }
  }
  return actions;
}

export const snapshotFinished = (progress: SnapshotProgress | null): boolean => progress !== null && progress.tables.every((t) => t.status === 'done');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * SIGKILLs the assembler and starts a new one. Returns whether the snapshot was unfinished at the
 * kill, the next process's start-up decision, and what `atKill` saw of the destination once the
 * appends in flight at the kill had landed (before the next start).
 */
export async function killAssembler<T = undefined>(rig: ChaosRig, tally: ChaosTally, atKill?: () => T): Promise<{ midSnapshot: boolean; next: StartDecision; seenAtKill: T | undefined }> {
  await rig.alive();
  const before = rig.snapshotProgress();
  const midSnapshot = !snapshotFinished(before);
  const pid = rig.assembler!.pid;
  await rig.assembler!.kill('SIGKILL');
  // Appends in flight still land (the server applies what it received): the progress as the next start finds it.
  await waitFor('appends in flight at the kill to land', () => rig.kurrent.pendingStreams().length === 0, { timeoutMs: 10_000, intervalMs: 5 });
  const after = rig.snapshotProgress();
  const seenAtKill = atKill?.();
  const next = await rig.startAssembler();
  tally.kills += 1;
  if (midSnapshot && !snapshotFinished(after)) {
    if (next.action !== 'resume-snapshot' || next.generation !== before!.generation) {
      throw new Error(`after a kill mid-snapshot the next start did not resume generation ${before!.generation}: ${JSON.stringify(next)}`);
    }
    tally.midSnapshotKills += 1;
  }
  const rows = (after?.tables ?? []).map((t) => `${t.table.replace('public.', '')} ${t.status} ${t.rowsDone}`).join(', ');
  tally.lines.push(`kill ${tally.kills}: SIGKILL of pid ${pid}${midSnapshot ? ` mid-snapshot (${rows})` : ''}; next start ${next.action}`);
  return { midSnapshot: midSnapshot && !snapshotFinished(after), next, seenAtKill };
}

/**
 * Restarts PostgreSQL on the same data directory and port — fast shutdown, or SIGKILL of the
 * postmaster (crash recovery on start) — leaving the assembler running.
 */
export async function restartPostgres(rig: ChaosRig, kind: 'pg-fast' | 'pg-immediate', tally: ChaosTally): Promise<void> {
  const pid = rig.assembler!.pid;
  const midSnapshot = !snapshotFinished(rig.snapshotProgress());
  const logOffset = await rig.logSize();
  const started = Date.now();
  if (kind === 'pg-fast') await rig.pg.stop();
  else await rig.pg.crash();
  const down = Date.now() - started;
  await rig.pg.start();
  if (kind === 'pg-fast') tally.pgFast += 1;
  else tally.pgImmediate += 1;
  // The assembler must have met the restart (and lived): its log says how it noticed. (The
  // initial snapshot may first consume a table already sent before it notices, at the next one.)
  const noticed = await waitFor(
    `the assembler (pid ${pid}) to notice the PostgreSQL restart`,
    async () => {
      await rig.alive();
      const text = await rig.logSince(logOffset);
      return NOTICED.find((msg) => text.includes(`"msg":"${msg}`)) ?? false;
    },
    { timeoutMs: 60_000, intervalMs: 20 },
  );
  if (rig.assembler!.pid !== pid) throw new Error(`the assembler process changed during a PostgreSQL restart`);
  tally.pgNoticed += 1;
  if (midSnapshot) tally.pgMidSnapshot += 1;
  tally.lines.push(
    `PostgreSQL ${kind === 'pg-fast' ? 'fast shutdown' : 'SIGKILL of the postmaster'}${midSnapshot ? ' mid-snapshot' : ''} (down ${down} ms, up again after ${Date.now() - started} ms), ` +
      `assembler pid ${pid} left running, noticed: "${noticed}"`,
  );
}

/**
 * Log lines by which the assembler shows it met a PostgreSQL restart (a prefix of each message):
 * while streaming, outside the replication stream (a new attempt follows), and in the two waits
 * of an attempt's start — for PostgreSQL itself, and for the slot (a restart met there, right
 * after a previous restart began a new attempt, is the only sign of it: the attempt then
 * connects to the restarted server).
 */
const NOTICED = [
  'source: connection lost, reconnecting',
  'PostgreSQL connection lost outside the replication stream',
  'start-up: PostgreSQL unreachable, retrying',
  'standby: PostgreSQL unreachable while waiting for the slot',
];

/**
 * Whether a run attempt begun after a PostgreSQL connection loss outside the replication stream
 * has not logged its start yet. (The destination may grow meanwhile — the ended attempt saves its
 * stream states — so "appending again" does not tell.)
 */
async function attemptStarting(rig: ChaosRig): Promise<boolean> {
  const text = await rig.logSince(0);
  const lost = text.lastIndexOf('"msg":"PostgreSQL connection lost outside the replication stream');
  return lost >= 0 && !text.includes('"msg":"assembler started"', lost);
}

/** Does one fault to the rig (see the header); resolves once the assembler has appended again. */
export async function perform(rig: ChaosRig, action: ChaosAction, tally: ChaosTally): Promise<void> {
  // Each fault meets a running assembler: a restart of PostgreSQL while a new attempt is still
  // loading its stream states (no PostgreSQL connection yet) would pass unseen.
  await waitFor('the run attempt begun after the last fault to start', async () => (await rig.alive(), !(await attemptStarting(rig))), { timeoutMs: 60_000, intervalMs: 20 });
  await rig.alive();
  const pid = rig.assembler!.pid;
  const started = Date.now();
  await rig.note(`fault ${action.kind} ${JSON.stringify(action)}`);
  switch (action.kind) {
    case 'kill':
      await killAssembler(rig, tally);
      break;
    case 'pg-fast':
    case 'pg-immediate':
      await restartPostgres(rig, action.kind, tally);
      break;
    case 'outage':
      await rig.kurrent.stop();
      await sleep(action.durationMs);
      await rig.kurrent.restart(); // with its data; the weak-idempotency cache is gone
      tally.outages += 1;
      tally.lines.push(`KurrentDB outage ${action.durationMs} ms, restarted with its data (weak-idempotency cache emptied)`);
      break;
    case 'slow':
      rig.kurrent.setAppendLatency(action.latencyMs);
      await sleep(action.durationMs);
      rig.kurrent.setAppendLatency(0);
      tally.slowPeriods += 1;
      tally.lines.push(`slow appends: ${action.latencyMs} ms each for ${action.durationMs} ms`);
      break;
  }
  // Recovered: the assembler (the same process, unless this was a kill) appends again.
  const records = rig.kurrent.recordCount();
  await waitFor(`the assembler to append again after ${action.kind}`, async () => (await rig.alive(), rig.kurrent.recordCount() > records), { timeoutMs: 120_000, intervalMs: 20 });
  if (action.kind !== 'kill' && rig.assembler!.pid !== pid) throw new Error(`the assembler process changed during ${action.kind}`);
  tally.lines[tally.lines.length - 1] += `; appending again ${Date.now() - started} ms after the fault began`;
}
