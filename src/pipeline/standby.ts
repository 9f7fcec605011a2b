/**
 * The hot standby: PostgreSQL lets one connection at a time stream a slot, so the slot itself is
 * the lock — no coordinator of our own. An assembler started while another process streams the
 * slot waits here, before anything that could conflict with the leader (the checkpoint-vs-slot
 * check, the snapshot decision, the source's checks, any append or checkpoint write): it logs
 * once who holds the slot, asks every `standby.pollIntervalMs` (fixed, no backoff), and goes on
 * when the slot is free — re-reading the durable checkpoint, which the leader moved meanwhile.
 *
 * The role (`status().role`) is `starting` until the first answer, `standby` while another process
 * holds the slot, `leader` from the first streaming session on. A leader that lost its connection
 * and finds the slot held by another process was replaced: its run ends without draining
 * (assembler.ts starts over as a standby). Waiting for the slot is not unavailability:
 * `lifecycle.startupTimeoutMs` does not apply to it.
 */
import pg from 'pg';
import { describeSlotHolder, querySlotHolder, type SlotHolder } from '../source/index.js';
import type { Logger } from './logger.js';
import { errorInfo, StopBeforeStart, type RunControl } from './run-control.js';
import { isPostgresUnreachable } from './startup.js';
import type { AssemblerRole } from './types.js';
import { connectSource } from '../source/connect-source.js';

export interface StandbyTracker {
  readonly role: AssemblerRole;
  /** Who streams the slot while this process is a standby (`null` otherwise). */
  readonly holder: SlotHolder | null;
  /** Another process streams the slot: logged on entering standby and when the holder changes, not on every poll. */
  standingBy(holder: SlotHolder): void;
  /** The slot was seen free: this process is about to take it. */
  slotFree(): void;
  /** This process streams the slot; logs `took over the slot after N s` when it was a standby. */
  leading(): void;
  /** A lost connection of this process still holds the slot (PostgreSQL has not ended its walsender yet): logged once until streaming again. */
  ownConnectionHolds(holder: SlotHolder): void;
}

const holderFields = (holder: SlotHolder) => ({ pid: holder.pid, client: holder.client, applicationName: holder.applicationName });

export function createStandbyTracker(log: Logger, slot: string, now: () => number = Date.now): StandbyTracker {
  let role: AssemblerRole = 'starting';
  let holder: SlotHolder | null = null;
  let previous: SlotHolder | null = null;
  let since: number | null = null;
  let freeAt: number | null = null;
  let ownLogged = false;
  return {
    get role() {
      return role;
    },
    get holder() {
      return role === 'standby' ? holder : null;
    },
    standingBy(next) {
      const changed = role !== 'standby' || holder?.pid !== next.pid;
      if (role !== 'standby') since = now();
      role = 'standby';
      holder = next;
      previous = next;
      freeAt = null;
      if (changed) log.info(`slot "${slot}" is active for ${describeSlotHolder(next)}: standing by`, { slot, holder: holderFields(next) });
    },
    slotFree() {
      freeAt ??= now();
    },
    leading() {
      if (role === 'standby' && since !== null) {
        const at = now();
        log.info(`took over the slot after ${((at - since) / 1000).toFixed(1)} s`, {
          slot,
          standbyMs: at - since,
          // From the poll that saw the slot free to the first streaming session: this process's own start-up.
          ...(freeAt !== null ? { freeToStreamingMs: at - freeAt } : {}),
          ...(previous ? { previousHolder: holderFields(previous) } : {}),
        });
      }
      role = 'leader';
      holder = null;
      since = null;
      freeAt = null;
      ownLogged = false;
    },
    ownConnectionHolds(own) {
      if (ownLogged) return;
      ownLogged = true;
      log.warn(`source: slot "${slot}" is still held by this process's lost connection (${describeSlotHolder(own)}); waiting for PostgreSQL to end it`, { slot, holder: holderFields(own) });
    },
  };
}

export interface AwaitSlotDeps {
  readonly connection: string;
  readonly slot: string;
  readonly pollIntervalMs: number;
  readonly control: RunControl;
  readonly log: Logger;
  readonly tracker: StandbyTracker;
}

/** The first half of the leader lock's key: the assembler's advisory locks apart from anybody else's. */
const LEADER_LOCK_SPACE = 'event-assembler leader';

/**
 * The leader's lock, held from the moment the slot was seen free until the run ends: a session
 * advisory lock (keyed by the slot's name) on the connection that polled. It covers what the slot
 * cannot — the phase before streaming (an initial snapshot, a new generation's), when no
 * connection streams the slot yet and a second instance would otherwise start too.
 */
export interface LeaderLock {
  /** Gives the lock back (ends its session). */
  release(): Promise<void>;
}

/** Takes the leader lock on `client`, or returns who holds it. */
async function tryLeaderLock(client: pg.Client, slot: string): Promise<SlotHolder | null> {
  const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1), hashtext($2)) AS ok', [LEADER_LOCK_SPACE, slot]);
  if (rows[0]!.ok) return null;
  const holder = await client.query<{ pid: number; client_addr: string | null; client_port: number | null; application_name: string | null }>(
    `SELECT l.pid, host(a.client_addr) AS client_addr, a.client_port, NULLIF(a.application_name, '') AS application_name
       FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = hashtext($1)::oid AND l.objid = hashtext($2)::oid
        AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())`,
    [LEADER_LOCK_SPACE, slot],
  );
  const row = holder.rows[0];
  const address = row?.client_addr ? `${row.client_addr}${row.client_port ? `:${row.client_port}` : ''}` : null;
  // Released between the two queries: report an unknown holder; the next poll takes the lock.
  return { pid: row?.pid ?? 0, client: address, applicationName: row?.application_name ?? null, ours: false };
}

/**
 * Waits while another process leads — streams the slot, or holds the leader lock (a leader's
 * initial snapshot, before it streams) — on one connection kept for the polls, which then holds
 * the leader lock for this run. Resolves `stoodBy` (true: the durable state must be read again)
 * and the lock; throws StopBeforeStart on stop. PostgreSQL unreachable meanwhile: logged once,
 * polled on.
 */
export async function awaitFreeSlot(deps: AwaitSlotDeps): Promise<{ stoodBy: boolean; lock: LeaderLock }> {
  const { control, log, tracker } = deps;
  let client: pg.Client | null = null;
  let stoodBy = false;
  let unreachable = false;
  let locked = false;
  try {
    for (;;) {
      if (control.stopRequested) throw new StopBeforeStart();
      try {
        if (!client) {
          client = await connectSource(deps.connection, { extra: { connectionTimeoutMillis: 10_000, application_name: 'event-assembler leader lock' } });
        }
        const holder = (await querySlotHolder(client, deps.slot)) ?? (await tryLeaderLock(client, deps.slot));
        unreachable = false;
        if (!holder) {
          if (stoodBy) tracker.slotFree();
          locked = true;
          const session = client;
          return { stoodBy, lock: { release: () => session.end().catch(() => undefined) } };
        }
        stoodBy = true;
        tracker.standingBy(holder);
      } catch (error) {
        if (!isPostgresUnreachable(error)) throw error;
        await client?.end().catch(() => undefined);
        client = null;
        if (!unreachable) log.warn('standby: PostgreSQL unreachable while waiting for the slot, retrying', { slot: deps.slot, error: errorInfo(error), pollIntervalMs: deps.pollIntervalMs });
        unreachable = true;
      }
      if (await control.sleep(deps.pollIntervalMs)) throw new StopBeforeStart();
    }
  } finally {
    if (!locked) await client?.end().catch(() => undefined);
  }
}
