/**
 * The consistent cut. A temporary slot created with an exported snapshot gives an exact one: the
 * snapshot holds every transaction whose commit record is before the slot's consistent point L
 * and none after (the walsender decides it from the WAL, not a clock). Events are then folded up
 * to L — a transaction's by its commit LSN (< L), a snapshot record's by the LSN it is ordered at
 * (≤ L) — once the assembler's checkpoint (durable in KurrentDB before the slot is acknowledged)
 * has reached L. A `pg_current_wal_lsn()` taken in a REPEATABLE READ transaction would not be
 * exact: a commit can be in the WAL before it is visible to new snapshots.
 */
import { randomUUID } from 'node:crypto';
import { BACKWARDS, END, KurrentDBClient } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { checkpointStreamName } from '../sink/index.js';
import { compareLsn } from '../source/position.js';
import { createSlotWithSnapshot, openSnapshotConnection, type ExportedSnapshotSlot } from '../source/snapshot/index.js';
import type { Lsn } from '../source/types.js';
import { ReconcileError } from './errors.js';
import { connectSource } from '../source/connect-source.js';

/** Prefix of the transactional message written right after the cut, so an idle line's checkpoint moves past it. */
export const RECONCILE_MARKER_PREFIX = 'event-assembler.reconcile';

export interface Cut {
  readonly lsn: Lsn;
  readonly snapshotName: string;
  /** A connection in a REPEATABLE READ transaction at the cut (more can be opened while the cut is held). */
  open(): Promise<pg.Client>;
  /** Ends the slot's connection: the temporary slot and the snapshot are gone. */
  close(): Promise<void>;
}

function clientConfig(connection: string | pg.ClientConfig): pg.ClientConfig {
  return typeof connection === 'string' ? { connectionString: connection } : connection;
}

/** Takes the cut: a temporary slot with an exported snapshot (needs REPLICATION), then the marker. */
export async function takeCut(connection: string | pg.ClientConfig): Promise<Cut> {
  const slot = `ea_reconcile_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const exported: ExportedSnapshotSlot = await createSlotWithSnapshot({ connection, slot, temporary: true });
  try {
    const marker = await connectSource(clientConfig(connection));
    try {
      await marker.query(`SELECT pg_logical_emit_message(true, $1, $2)`, [RECONCILE_MARKER_PREFIX, slot]);
    } finally {
      await marker.end().catch(() => undefined);
    }
  } catch (error) {
    await exported.close();
    throw error;
  }
  return {
    lsn: exported.consistentPoint,
    snapshotName: exported.snapshotName,
    open: () => openSnapshotConnection(connection, exported.snapshotName),
    close: () => exported.close(),
  };
}

/** The last position in the assembler's checkpoint stream (`null`: none). */
export async function readCheckpointLsn(client: KurrentDBClient, assembler: string): Promise<Lsn | null> {
  try {
    for await (const resolved of client.readStream(checkpointStreamName(assembler), { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
      const endLsn = (resolved.event?.data as { position?: { endLsn?: unknown } } | undefined)?.position?.endLsn;
      return typeof endLsn === 'string' ? endLsn : null;
    }
    return null;
  } catch (error) {
    if ((error as { type?: unknown }).type === 'stream-not-found') return null;
    throw error;
  }
}

/** Waits (polling, with a deadline) until the checkpoint is at or past `lsn`; says where it stood if it does not get there. */
export async function waitForCheckpoint(client: KurrentDBClient, assembler: string, lsn: Lsn, timeoutMs: number): Promise<{ checkpointLsn: Lsn; waitedMs: number }> {
  const started = Date.now();
  let last: Lsn | null = null;
  for (let delay = 20; ; delay = Math.min(delay * 2, 250)) {
    last = await readCheckpointLsn(client, assembler);
    if (last !== null && compareLsn(last, lsn) >= 0) return { checkpointLsn: last, waitedMs: Date.now() - started };
    if (Date.now() - started >= timeoutMs) {
      throw new ReconcileError(
        'RECONCILE_CUT_NOT_REACHED',
        `the assembler "${assembler}" has not made the destination durable up to the cut ${lsn} within ${Math.round(timeoutMs / 1000)} s ` +
          `(its checkpoint stream ${checkpointStreamName(assembler)} is at ${last ?? 'nothing yet'}): is it running and caught up? ` +
          '(event-assembler status shows its lag; --wait-timeout waits longer)',
        { assembler, cutLsn: lsn, checkpointLsn: last, timeoutMs },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}
