// Hot standby acceptance (issue 15): two `event-assembler run` processes with the same
// configuration against one PostgreSQL and one in-memory KurrentDB, the invoicing workload
// writing transactions throughout. The first to stream the slot leads; the other logs "slot … is
// active for pid … on …: standing by". The leader is killed with SIGKILL EA_STANDBY_KILLS times
// (default 5); each time, once the standby took over, the killed one is started again and must
// stand by — so the roles alternate. At the end the destination is compared with a reference slot
// (src/testing/verify-destination.ts): every event exactly once, in source order per stream.
//
// Takeover time, defined: from the SIGKILL (this process's clock, taken right before the signal)
// until a transaction committed right after the kill — a marker customer, `customer-takeover_<n>` —
// is durable in KurrentDB. Only the new leader can have appended it, so this is the time the
// pipeline was out of service, end to end. Each must be < 3 s. Also reported per kill: kill →
// PostgreSQL released the slot (`active_pid` no longer the killed walsender, polled every 10 ms),
// and kill → the standby's `took over the slot` log line (its `time` field).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { createInvoicingWorkload, type InvoicingWorkload } from '../../examples/invoicing/workload.js';
import { createReferenceSlot, dropReferenceSlot, formatDestinationReport, verifyDestination } from '../../src/testing/verify-destination.js';
import { createPipelineRig, rigEnv, startCli, TABLES, workload, writeRigConfig, type CliProcess, type PipelineRig } from './pipeline-rig.js';

const KILLS = Number(process.env.EA_STANDBY_KILLS ?? 5);
const TAKEOVER_LIMIT_MS = 3_000;
const NAME = 'standby';

interface Takeover {
  readonly n: number;
  readonly killedPid: number;
  readonly walsenderPid: number;
  /** Kill → PostgreSQL no longer shows the killed walsender on the slot. */
  readonly releasedMs: number;
  /** Kill → the standby's `took over the slot` line. */
  readonly tookOverMs: number;
  /** Kill → the marker committed after the kill is durable in KurrentDB (the takeover time). */
  readonly durableMs: number;
  /** The standby's own account: standing by → streaming, and slot seen free → streaming. */
  readonly standbyMs: number;
  readonly freeToStreamingMs: number | null;
}

const percentile = (values: readonly number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

describe('hot standby: two `event-assembler run` processes on one slot', () => {
  let rig: PipelineRig;
  let dir: string;
  let load: InvoicingWorkload | null = null;
  const stopLoad = new AbortController();
  const processes: CliProcess[] = [];
  const reference = `standby_ref_${process.pid}`;

  beforeAll(async () => {
    rig = await createPipelineRig(NAME);
    // Right after the assembler's slot, before any write: the same start point.
    await createReferenceSlot(rig.db.connectionString, reference);
    dir = mkdtempSync(join(tmpdir(), 'ea-standby-'));
  });

  afterAll(async () => {
    stopLoad.abort();
    for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await Promise.all(processes.map((p) => p.exit(10_000)));
    await load?.close().catch(() => undefined);
    await dropReferenceSlot(rig.db.connectionString, reference).catch(() => undefined);
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(`takes over within ${TAKEOVER_LIMIT_MS / 1000} s of each of ${KILLS} SIGKILLs of the leader, roles alternating, and the destination holds every event exactly once`, { timeout: 300_000 }, async () => {
    const file = writeRigConfig(dir, rig, { name: NAME, envPrefix: 'EA_SB', connections: 'env-reference', statusIntervalMs: 500 });
    const env = rigEnv(rig, 'EA_SB');
    const messages = (p: CliProcess) => p.lines().map((l) => String(l['msg']));
    const start = (): CliProcess => {
      const p = startCli(['run', '--config', file], env);
      processes.push(p);
      return p;
    };
    const alive = (p: CliProcess) => {
      if (p.child.exitCode !== null) throw new Error(`assembler pid ${p.child.pid} exited with ${p.child.exitCode}:\n${p.stderr().slice(-4000)}`);
    };
    const standingBy = (p: CliProcess) => p.lines().filter((l) => String(l['msg']).endsWith(': standing by'));
    const slotRow = async () =>
      (await rig.sql('SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1', [rig.slots[0]]))[0] as { active_pid: number | null };
    const businessEvents = () => rig.businessStreams().reduce((n, s) => n + rig.kdb.readStreamEvents(s).length, 0);

    let leader = start();
    await rig.until(() => (alive(leader), expect(messages(leader)).toContain('assembler started')), 60_000);
    let standby = start();
    await rig.until(() => (alive(standby), expect(standingBy(standby)).toHaveLength(1)), 60_000);
    // One INFO line naming the leader's walsender and its client; status says standby (no start-up deadline applies).
    const walsender = (await slotRow()).active_pid!;
    expect(standingBy(standby)[0]).toMatchObject({ level: 'info', holder: { pid: walsender } });
    expect(String(standingBy(standby)[0]!['msg'])).toMatch(new RegExp(`^slot "${rig.slots[0]}" is active for pid ${walsender} on [^ ]+:\\d+( \\(.*\\))?: standing by$`));
    expect(messages(standby)).not.toContain('assembler started');

    load = createInvoicingWorkload({ connection: rig.db.connectionString, seed: 15, concurrency: 2, rate: 100 });
    const running = load.run({ signal: stopLoad.signal });
    running.catch(() => undefined); // awaited below

    const takeovers: Takeover[] = [];
    for (let n = 1; n <= KILLS; n++) {
      // The leader is appending the live workload (≈ 1.5 s of it: the standby has polled a few times).
      const before = businessEvents();
      await rig.until(() => (alive(leader), expect(businessEvents()).toBeGreaterThan(before + 150)), 30_000);
      const killedWalsender = (await slotRow()).active_pid!;
      const tookOverBefore = standby.lines().filter((l) => String(l['msg']).startsWith('took over the slot')).length;
      const killedAt = Date.now();
      leader.child.kill('SIGKILL');
      await workload(rig).customer(`takeover_${n}`);
      let releasedAt: number | null = null;
      let durableAt: number | null = null;
      await vi.waitFor(async () => {
        alive(standby);
        if (releasedAt === null && (await slotRow()).active_pid !== killedWalsender) releasedAt = Date.now();
        if (durableAt === null && rig.kdb.readStreamEvents(`customer-takeover_${n}`).length > 0) durableAt = Date.now();
        expect(releasedAt !== null && durableAt !== null).toBe(true);
      }, { timeout: 60_000, interval: 10 });
      expect(await leader.exit(10_000)).toBeNull(); // killed by the signal
      const tookOver = standby.lines().filter((l) => String(l['msg']).startsWith('took over the slot'));
      expect(tookOver, `kill ${n}: the standby (pid ${standby.child.pid}) took over`).toHaveLength(tookOverBefore + 1);
      const line = tookOver[tookOver.length - 1]!;
      takeovers.push({
        n, killedPid: leader.child.pid!, walsenderPid: killedWalsender,
        releasedMs: releasedAt! - killedAt, tookOverMs: Date.parse(String(line['time'])) - killedAt, durableMs: durableAt! - killedAt,
        standbyMs: Number(line['standbyMs']), freeToStreamingMs: typeof line['freeToStreamingMs'] === 'number' ? line['freeToStreamingMs'] : null,
      });
      console.log(`standby test: kill ${n} ${JSON.stringify(takeovers[takeovers.length - 1])}`);
      if (process.env['EA_STANDBY_DEBUG']) console.log(standby.stderr());
      // The killed process comes back, and must stand by behind the new leader.
      const restarted = start();
      await rig.until(() => (alive(restarted), expect(standingBy(restarted).length).toBeGreaterThanOrEqual(1)), 60_000);
      [leader, standby] = [standby, restarted];
    }

    // Drain: the workload stops, the leader catches up and acknowledges everything, both stop on SIGTERM.
    stopLoad.abort();
    const counts = await running;
    await workload(rig).customer('final');
    const [{ lsn }] = (await rig.sql('SELECT pg_current_wal_lsn()::text AS lsn')) as [{ lsn: string }];
    await rig.until(async () => {
      alive(leader);
      const [row] = (await rig.sql('SELECT confirmed_flush_lsn >= $2::pg_lsn AS caught_up FROM pg_replication_slots WHERE slot_name = $1', [rig.slots[0], lsn])) as [{ caught_up: boolean }];
      expect(row.caught_up).toBe(true);
    }, 60_000);
    leader.child.kill('SIGTERM');
    standby.child.kill('SIGTERM');
    expect(await leader.exit(30_000)).toBe(0);
    expect(await standby.exit(30_000)).toBe(0);
    expect(messages(standby), 'the standby never streamed').not.toContain('assembler started');

    const report = await verifyDestination({
      source: { connection: rig.db.connectionString, slot: reference, publication: rig.publication, tables: TABLES.map((table) => ({ table, needsOldValues: table === 'public.invoice' })) },
      destination: { connectionString: rig.kdb.connectionString },
      mappers,
      assembler: NAME,
    });
    const durable = takeovers.map((t) => t.durableMs);
    const tookOver = takeovers.map((t) => t.tookOverMs);
    const released = takeovers.map((t) => t.releasedMs);
    console.log(
      [
        `standby test: ${KILLS} kills, ${counts.transactions} workload transactions (${JSON.stringify(counts.operations)})`,
        `  takeover (kill → marker durable): p50 ${percentile(durable, 50)} ms, max ${Math.max(...durable)} ms`,
        `  kill → "took over the slot": p50 ${percentile(tookOver, 50)} ms, max ${Math.max(...tookOver)} ms; kill → slot released by PostgreSQL: p50 ${percentile(released, 50)} ms, max ${Math.max(...released)} ms`,
        formatDestinationReport(report),
      ].join('\n'),
    );
    expect(report.ok, formatDestinationReport(report, { maxListed: 10 })).toBe(true);
    expect(report.expectedEvents).toBeGreaterThan(KILLS);
    expect(takeovers).toHaveLength(KILLS);
    for (const t of takeovers) expect(t.durableMs, `takeover after kill ${t.n}: ${JSON.stringify(t)}`).toBeLessThan(TAKEOVER_LIMIT_MS);
  });
});
