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

/**
 * Waits while another process streams the slot (one connection kept for the polls). Resolves
 * `true` when it stood by (the durable state must be read again), `false` when the slot was free
 * at once; throws StopBeforeStart on stop. PostgreSQL unreachable meanwhile: logged once, polled on.
 */
export async function awaitFreeSlot(deps: AwaitSlotDeps): Promise<boolean> {
  const { control, log, tracker } = deps;
  let client: pg.Client | null = null;
  let stoodBy = false;
  let unreachable = false;
  try {
    for (;;) {
      if (control.stopRequested) throw new StopBeforeStart();
      try {
        if (!client) {
          client = new pg.Client({ connectionString: deps.connection, connectionTimeoutMillis: 10_000 });
          client.on('error', () => undefined);
          await client.connect();
        }
        const holder = await querySlotHolder(client, deps.slot);
        unreachable = false;
        if (!holder) {
          if (stoodBy) tracker.slotFree();
          return stoodBy;
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
    await client?.end().catch(() => undefined);
  }
}
