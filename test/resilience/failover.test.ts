// Source failover (PostgreSQL 17 failover slots): a primary and a streaming standby of it
// (src/testing/postgres-standby.ts), the real CLI (`event-assembler run`) as a child process with
// both hosts in its connection string (`…@primary,standby/…?target_session_attrs=read-write`), a
// live invoicing writer; the primary is SIGKILLed mid-workload, the standby promoted
// (`pg_promote()`), the writer goes on against it.
//
// 1. With the slot created by setup (failover = true on PostgreSQL 17) and synchronized to the
//    standby (sync_replication_slots, synchronized_standby_slots): the assembler reconnects to the
//    promoted standby by itself and continues. The destination is compared with a reference: a
//    logical slot created ON THE STANDBY before the workload (logical decoding on a standby,
//    PostgreSQL 16+), which reads exactly the history the standby has — the transactions the
//    killed primary committed but never shipped are in neither — and goes on across the promotion.
//    Every expected event exactly once, the same ids (the system identifier is the standby's too);
//    the checkpoint records timeline 2.
// 2. With a slot made without failover (not synchronized): on the promoted standby the slot is
//    missing, and the assembler refuses — REBUILD_NEEDED, exit 3 — instead of going on from "now";
//    nothing from the new primary is appended.
//
// Figures printed: wall time, events checked, promote → first event appended from the new primary.
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { readOfflineStatus } from '../../src/observability/offline-status.js';
import { connectSource, NoPrimaryHostError } from '../../src/source/connect-source.js';
import { captureRoleSql, setupCapture } from '../../src/source/setup.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { startFailoverPair, type FailoverPair } from '../../src/testing/postgres-standby.js';
import { formatDestinationReport, verifyDestination } from '../../src/testing/verify-destination.js';
import { REPO_ROOT, startAssemblerProcess, tailOf, waitFor, writeInvoicingConfig, type AssemblerProcess } from './assembler-process.js';
import { destinationProgress } from './destination-progress.js';

const TABLES = ['public.customer', 'public.invoice', 'public.invoice_line', 'public.payment'];
const ASSEMBLER = 'failover';
const SLOT = 'failover_assembler';
const REFERENCE = 'failover_reference';
const PUBLICATION = 'failover_pub';
/** Writer transactions on the primary before the kill (at least; it keeps writing until killed) and on the promoted standby after. */
const BEFORE = Number(process.env['EA_FAILOVER_BEFORE'] ?? 300);
const AFTER = Number(process.env['EA_FAILOVER_AFTER'] ?? 300);
/** The writer's pace, transactions per second. */
const RATE = 150;
const decoder = new TextDecoder();

interface Writer {
  /** Transactions committed so far. */
  readonly committed: number;
  /** Resolves when `count` transactions committed or a transaction failed (the server died). */
  readonly done: Promise<{ committed: number; error: Error | null }>;
}

/**
 * A live writer: transaction i registers customer fo-<i> and drafts invoice fo-<i>; every third
 * also voids the invoice drafted two transactions before (an update of an existing stream). Stops
 * at the first failure — a killed primary — without retrying: what committed is what the history says.
 */
function startWriter(config: pg.ClientConfig, from: number, count: number, perSecond: number): Writer {
  let committed = 0;
  const done = (async () => {
    const client = new pg.Client(config);
    client.on('error', () => undefined);
    try {
      await client.connect();
      const started = Date.now();
      for (let i = from; i < from + count; i++) {
        const id = `fo-${i}`;
        await client.query('BEGIN');
        await client.query(`INSERT INTO customer (id, name, email, country) VALUES ($1, $2, $3, 'NL')`, [id, `Customer ${i}`, `${id}@example.test`]);
        await client.query(`INSERT INTO invoice (id, customer_id, status, currency) VALUES ($1, $1, 'draft', 'EUR')`, [id]);
        if (i % 3 === 0 && i - 2 >= 0) await client.query(`UPDATE invoice SET status = 'void', void_reason = 'failover test', updated_at = now() WHERE id = $1 AND status = 'draft'`, [`fo-${i - 2}`]);
        await client.query('COMMIT');
        committed += 1;
        const ahead = started + ((i - from + 1) * 1000) / perSecond - Date.now();
        if (ahead > 0) await new Promise((resolve) => setTimeout(resolve, ahead));
      }
      return { committed, error: null };
    } catch (error) {
      return { committed, error: error instanceof Error ? error : new Error(String(error)) };
    } finally {
      await client.end().catch(() => undefined);
    }
  })();
  return {
    get committed() {
      return committed;
    },
    done,
  };
}

/** The timeline of a stored event's `source.checkpoint` (`v1:<systemId>:<timeline>:…`), or null. */
function timelineOf(metadata: Uint8Array): number | null {
  try {
    const checkpoint = (JSON.parse(decoder.decode(metadata)) as Record<string, unknown>)['source.checkpoint'];
    return typeof checkpoint === 'string' ? Number(checkpoint.split(':')[2]) : null;
  } catch {
    return null;
  }
}

/** Business events per timeline of their source position. */
function eventsByTimeline(kurrent: InMemoryKurrentDB): Map<number | null, number> {
  const counts = new Map<number | null, number>();
  for (const stream of kurrent.streamNames()) {
    if (stream.startsWith('$') || stream.startsWith('event-assembler.')) continue;
    for (const event of kurrent.readStreamEvents(stream)) {
      const t = timelineOf(event.metadata);
      counts.set(t, (counts.get(t) ?? 0) + 1);
    }
  }
  return counts;
}

function lastCheckpoint(kurrent: InMemoryKurrentDB): { endLsn: string; timeline?: number; checkpoint: string } | null {
  const events = kurrent.readStreamEvents(`event-assembler.checkpoint-${ASSEMBLER}`);
  const last = events[events.length - 1];
  return last ? (JSON.parse(decoder.decode(last.data)) as { position: { endLsn: string; timeline?: number; checkpoint: string } }).position : null;
}

interface Rig {
  readonly pair: FailoverPair;
  readonly kurrent: InMemoryKurrentDB;
  readonly dir: string;
  readonly logFile: string;
  readonly captureUrl: string;
  child: AssemblerProcess | null;
}

const rigs: Rig[] = [];

afterEach(async () => {
  for (const rig of rigs.splice(0)) {
    if (rig.child?.running) await rig.child.kill('SIGKILL');
    await rig.kurrent.close().catch(() => undefined);
    await rig.pair.destroy();
    await fs.rm(rig.dir, { recursive: true, force: true });
  }
});

/** A primary + standby with the invoicing schema, a capture role, the publication and the assembler's slot (`failover` as given to setup), and a KurrentDB. */
async function createRig(failover: boolean): Promise<Rig> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'event-assembler-failover-'));
  const pair = await startFailoverPair();
  const kurrent = await startInMemoryKurrentDB();
  const rig: Rig = { pair, kurrent, dir, logFile: path.join(dir, 'assembler.log'), captureUrl: '', child: null };
  rigs.push(rig);
  const { primary, standby } = pair;
  await primary.query(await fs.readFile(path.join(REPO_ROOT, 'examples/invoicing/schema.sql'), 'utf8'));
  const role = `capture_${randomBytes(3).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  for (const statement of captureRoleSql({ role, tables: TABLES, database: 'postgres', password }).split('\n').filter((l) => !l.startsWith('--'))) await primary.query(statement);
  const report = await setupCapture({ connection: primary.connectionConfig(), publication: PUBLICATION, slot: SLOT, tables: TABLES, failover });
  expect(report.slot.failover).toBe(failover);
  const url = `postgresql://${role}:${password}@${primary.host}:${primary.port},${standby.host}:${standby.port}/postgres?target_session_attrs=read-write`;
  Object.assign(rig, { captureUrl: url });
  const configFile = await writeInvoicingConfig(path.join(dir, 'assembler.config.ts'), {
    name: ASSEMBLER, slot: SLOT, publication: PUBLICATION, tables: TABLES, captureEnv: 'EA_FAILOVER_CAPTURE_URL', kurrentEnv: 'EA_FAILOVER_KURRENTDB_URL',
  });
  rig.child = startAssemblerProcess(configFile, rig.logFile, { EA_FAILOVER_CAPTURE_URL: url, EA_FAILOVER_KURRENTDB_URL: kurrent.connectionString });
  await waitFor('the assembler to start streaming', async () => {
    if (!rig.child?.running) throw new Error(`the assembler exited at start-up:\n${await tailOf(rig.logFile)}`);
    return (await fs.readFile(rig.logFile, 'utf8').catch(() => '')).includes('"assembler started"');
  }, { timeoutMs: 60_000, intervalMs: 50 });
  return rig;
}

/** A logical slot on the standby: created there once a running-xacts record from the primary arrives (nudged with pg_log_standby_snapshot()). */
async function createReferenceOnStandby(pair: FailoverPair): Promise<void> {
  let created = false;
  const creating = pair.standby.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [REFERENCE]).finally(() => (created = true));
  while (!created) {
    await pair.primary.query('SELECT pg_log_standby_snapshot()');
    await Promise.race([creating.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 100))]);
  }
  await creating;
}

describe('source failover: the primary killed, the standby promoted (PostgreSQL 17 failover slots, real CLI)', () => {
  it('a synchronized failover slot: the assembler reconnects to the promoted standby and continues — every event once, the same ids, timeline 2 in the checkpoint', { timeout: 120_000 }, async () => {
    const started = Date.now();
    const rig = await createRig(true);
    const { primary, standby } = rig.pair;
    await createReferenceOnStandby(rig.pair);

    // ── before: a live writer on the primary; the slot synchronized to the standby; status says failover-safe ──
    // Writes until its server dies: the kill falls in the middle of a transaction stream.
    const before = startWriter(primary.connectionConfig(), 0, 1_000_000, RATE);
    await waitFor('a third of the writes to land', () => destinationProgress(rig.kurrent, ASSEMBLER).events >= BEFORE / 3, { timeoutMs: 30_000 });
    const primaryConfirmed = (await primary.query<{ lsn: string }>(`SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1`, [SLOT]))[0]!.lsn;
    const synced = await standby.waitForSyncedSlot(SLOT, primaryConfirmed!, 30_000);
    const status = await readOfflineStatus({ name: ASSEMBLER, slot: SLOT, connection: rig.captureUrl, connectionString: rig.kurrent.connectionString });
    expect(status.server).toBe(`${primary.host}:${primary.port}`);
    expect(status.failover).toMatchObject({ supported: true, failover: true, synchronizedStandbySlots: 'standby1', safe: true });
    expect(status.failover?.standbys).toEqual([expect.objectContaining({ server: `${standby.host}:${standby.port}`, inRecovery: true, synced: true })]);
    expect(status.failover?.summary).toMatch(/^failover-safe: failover = true, synchronized_standby_slots = 'standby1', synced on /);

    // ── the failover: SIGKILL mid-workload, promote ──
    await waitFor(`${BEFORE} writer transactions`, () => before.committed >= BEFORE, { timeoutMs: 60_000 });
    await primary.crash();
    const beforeDone = await before.done;
    expect(beforeDone.error, 'the writer stops because its server died').not.toBeNull();
    const eventsAtKill = destinationProgress(rig.kurrent, ASSEMBLER).events;
    // The host walk, between the kill and the promotion: one host refuses, the other is a standby.
    const walk = await connectSource(rig.captureUrl).then((c) => c.end().then(() => null), (error: unknown) => error);
    expect(walk).toBeInstanceOf(NoPrimaryHostError);
    expect((walk as Error).message).toMatch(new RegExp(`^no host of source.connection accepted a read-write session: ${primary.host}:${primary.port} failed \\(.*ECONNREFUSED.*\\); ${standby.host}:${standby.port} is in recovery \\(a standby\\)$`));
    const promotedAt = Date.now();
    await standby.promote();
    const after = startWriter(standby.connectionConfig(), 1_000_000, AFTER, RATE);
    const firstFromNewPrimaryMs = await waitFor('the first event appended from the promoted standby (timeline 2)', async () => {
      if (!rig.child?.running) throw new Error(`the assembler exited:\n${await tailOf(rig.logFile)}`);
      return (eventsByTimeline(rig.kurrent).get(2) ?? 0) > 0 ? Date.now() - promotedAt : false;
    }, { timeoutMs: 60_000, intervalMs: 10 });
    const afterDone = await after.done;
    expect(afterDone.error).toBeNull();

    // ── caught up: the checkpoint at the promoted standby's last commit, on timeline 2 ──
    const endLsn = (await standby.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'))[0]!.lsn;
    await waitFor('the checkpoint to reach the last commit', async () => {
      if (!rig.child?.running) throw new Error(`the assembler exited:\n${await tailOf(rig.logFile)}`);
      const last = lastCheckpoint(rig.kurrent);
      return (await standby.query<{ ok: boolean }>('SELECT $1::pg_lsn >= $2::pg_lsn AS ok', [last?.endLsn ?? '0/0', endLsn]))[0]!.ok;
    }, { timeoutMs: 60_000, intervalMs: 50 });
    const checkpoint = lastCheckpoint(rig.kurrent)!;
    expect(checkpoint.timeline).toBe(2);
    expect(checkpoint.checkpoint.split(':')[2]).toBe('2');
    const exit = await rig.child!.kill('SIGTERM');
    expect(exit.code, await tailOf(rig.logFile)).toBe(0);
    const log = await fs.readFile(rig.logFile, 'utf8');
    const failoverLine = log.split('\n').find((line) => line.includes('source: failover — capture continues on another server or timeline'));
    expect(failoverLine).toBeDefined();
    const failoverFields = JSON.parse(failoverLine!) as Record<string, unknown>;
    expect(log, 'the start-up log names the slot\'s failover state').toMatch(/"msg":"source: (not )?failover-safe: failover = true, synchronized_standby_slots = 'standby1'/);
    expect(failoverFields).toMatchObject({ server: `${standby.host}:${standby.port}`, timeline: 2, previousServer: `${primary.host}:${primary.port}`, previousTimeline: 1 });

    // ── the comparison: the reference slot on the (now promoted) standby ──
    const report = await verifyDestination({
      source: { connection: standby.connectionConfig(), slot: REFERENCE, publication: PUBLICATION, tables: TABLES.map((table) => ({ table, needsOldValues: table === 'public.invoice' })) },
      destination: { connectionString: rig.kurrent.connectionString },
      mappers,
      assembler: ASSEMBLER,
    });
    const byTimeline = eventsByTimeline(rig.kurrent);
    const wallMs = Date.now() - started;
    console.log(
      [
        `failover test: ${beforeDone.committed} writer transactions on the primary (killed after ${BEFORE}+, ${eventsAtKill} events in KurrentDB then), ${afterDone.committed} on the promoted standby; ` +
          `standby slot synced at ${synced.confirmedFlushLsn} (primary's confirmed ${primaryConfirmed}); ` +
          `after the failover the session started at ${String(failoverFields['startLsn'])} with the promoted standby's slot at ${String(failoverFields['slotConfirmedFlushLsn'])}`,
        `  promote → first event appended from the new primary: ${firstFromNewPrimaryMs} ms; events by source timeline: ${[...byTimeline].map(([t, n]) => `${t}: ${n}`).join(', ')}; wall time ${(wallMs / 1000).toFixed(1)} s`,
        formatDestinationReport(report),
      ].join('\n'),
    );
    expect(report.ok, formatDestinationReport(report, { maxListed: 10 })).toBe(true);
    expect(report.expectedEvents).toBe(report.actualEvents);
    // The reference holds every transaction the standby received: at least all committed after the promotion and most of those before.
    expect(report.referenceTransactions).toBeGreaterThanOrEqual(AFTER + BEFORE);
    expect(byTimeline.get(1) ?? 0).toBeGreaterThan(0);
    expect(byTimeline.get(2) ?? 0).toBeGreaterThan(0);
  });

  it('a slot without failover (not synchronized): on the promoted standby the assembler refuses with REBUILD_NEEDED (exit 3), nothing from the new primary appended', { timeout: 90_000 }, async () => {
    const rig = await createRig(false);
    const { primary, standby } = rig.pair;
    const before = startWriter(primary.connectionConfig(), 0, 1_000_000, RATE);
    await waitFor('some writes to land', () => destinationProgress(rig.kurrent, ASSEMBLER).events >= 40, { timeoutMs: 30_000 });
    const status = await readOfflineStatus({ name: ASSEMBLER, slot: SLOT, connection: rig.captureUrl, connectionString: rig.kurrent.connectionString });
    expect(status.failover).toMatchObject({ failover: false, safe: false });
    expect(status.failover?.summary).toMatch(/^not failover-safe: failover = false, .*NOT synced on /);
    await primary.crash();
    await before.done;
    await standby.promote();
    const after = startWriter(standby.connectionConfig(), 1_000_000, 50, RATE);
    const exit = await rig.child!.exited;
    await after.done;
    const log = await fs.readFile(rig.logFile, 'utf8');
    expect(exit.code, log.slice(-4000)).toBe(3);
    expect(log).toMatch(/"code":"REBUILD_NEEDED"/);
    // The start-up log had said so: several hosts, and a slot that does not survive a failover.
    expect(log).toMatch(/"level":"warn","msg":"source: not failover-safe: failover = false, .* — a failover to that standby would end capture with REBUILD_NEEDED/);
    expect(log).toContain(`replication slot \\"${SLOT}\\" does not exist on this server (${standby.host}:${standby.port})`);
    expect(eventsByTimeline(rig.kurrent).get(2) ?? 0).toBe(0);
    // A restart on the promoted standby refuses the same way: a recorded position, and no slot.
    const restartLog = path.join(rig.dir, 'restart.log');
    const restarted = startAssemblerProcess(path.join(rig.dir, 'assembler.config.ts'), restartLog, { EA_FAILOVER_CAPTURE_URL: rig.captureUrl, EA_FAILOVER_KURRENTDB_URL: rig.kurrent.connectionString });
    rig.child = restarted;
    const restartExit = await restarted.exited;
    const restartText = await fs.readFile(restartLog, 'utf8');
    expect(restartExit.code, restartText.slice(-4000)).toBe(3);
    expect(restartText).toMatch(/"code":"REBUILD_NEEDED".*the replication slot no longer exists, so the changes after the stored position/);
    expect(eventsByTimeline(rig.kurrent).get(2) ?? 0).toBe(0);
    const n = (await standby.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name = $1`, [SLOT]))[0]!.n;
    expect(n, 'no slot was created on the new primary behind the operator\'s back').toBe(0);
  });
});
