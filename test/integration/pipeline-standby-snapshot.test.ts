// A standby started while the leader is still in its initial snapshot — before any connection
// streams the slot — must stand by too: the leader holds the leader lock (a session advisory lock
// keyed by the slot) from the moment it found the slot free. While the snapshot reads, the slot
// exists and no connection holds it (the replication connection that created it only keeps the
// exported snapshot alive). The leader is held mid-snapshot by a lock the test takes on a table it
// has not read yet; the second instance, started meanwhile, names the leader's lock connection and
// starts nothing; when the leader streams and later stops, the standby takes over. Every expected event exactly once, against a reference slot with its own
// exported snapshot.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { createReferenceSlotWithSnapshot, dropReferenceSlot, formatDestinationReport, verifyDestination } from '../../src/testing/verify-destination.js';
import { createPipelineRig, TABLES, workload, type PipelineRig } from './pipeline-rig.js';

describe('hot standby during the leader\'s initial snapshot', () => {
  let rig: PipelineRig;
  let blocker: pg.Client | null = null;
  const assemblers: Assembler[] = [];
  const ref = 'sbsnap_ref';

  beforeAll(async () => {
    rig = await createPipelineRig('sbsnap', { slots: 1 });
    await rig.sql('SELECT pg_drop_replication_slot($1)', [rig.slots[0]]); // the initial snapshot creates its own
  });
  afterAll(async () => {
    await blocker?.end().catch(() => undefined);
    for (const a of assemblers) await a.stop().catch(() => undefined);
    await dropReferenceSlot(rig.db.connectionString, ref).catch(() => undefined);
    await rig?.close();
  });

  it('stands by while the leader snapshots, takes over when it stops; every event once', async () => {
    const w = workload(rig);
    // Customers enough for the snapshot to take a while (chunks of 2) before it reaches invoice_line.
    await rig.sql(
      `INSERT INTO customer (id, name, email, card_number, country) SELECT 'sc' || g, 'Customer ' || g, g || '@secret.example', NULL, 'NL' FROM generate_series(1, 2000) g`,
    );
    for (let i = 1; i <= 3; i++) {
      await w.customer(`s${i}`);
      await w.draft(`si${i}`, `s${i}`);
    }
    const reference = await createReferenceSlotWithSnapshot(rig.db.connectionString, ref, { mappers, assembler: 'sbsnap', generation: '1', tables: TABLES });
    blocker = new pg.Client({ connectionString: rig.db.connectionString });
    await blocker.connect();

    const config = rig.config({ snapshot: { mode: 'initial', chunkSize: 2 }, standby: { pollIntervalMs: 50 } });
    const leaderLog = rig.logger();
    const leader = createAssembler(config, { logger: leaderLog });
    assemblers.push(leader);
    const leading = leader.run();
    leading.catch(() => undefined);
    await rig.until(() => expect(leader.status().snapshot?.consistentPoint ?? null).not.toBeNull());
    // Hold the snapshot before invoice_line (NOWAIT: fails loudly if the leader had read it already).
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE public.invoice_line IN ACCESS EXCLUSIVE MODE NOWAIT');
    expect(leader.status().role).not.toBe('leader');
    const [slotRow] = (await rig.sql('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [rig.slots[0]])) as [{ active: boolean }];
    expect(slotRow.active, 'mid-snapshot, the slot alone does not say it is taken').toBe(false);

    const standbyLog = rig.logger();
    const standby = createAssembler(config, { logger: standbyLog });
    assemblers.push(standby);
    const standing = standby.run();
    standing.catch(() => undefined);
    // The leader lock: the one granted advisory lock in this database, held by the leader's session.
    const [lockHolder] = (await rig.sql("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")) as [{ pid: number }];
    await rig.until(() => expect(standby.status()).toMatchObject({ role: 'standby', slotHolder: { pid: lockHolder.pid } }));
    expect(standbyLog.lines.map((l) => l.message)).not.toContain('snapshot: decision');

    await blocker.query('COMMIT');
    await rig.until(() => expect(leader.status()).toMatchObject({ role: 'leader', state: 'running' }));
    await w.issue('si1');
    await rig.until(() => expect(rig.events('invoice-si1').map((e) => e.type)).toEqual(['InvoiceImported', 'InvoiceIssued']));
    expect(standby.status().role).toBe('standby');

    await leader.stop();
    await leading;
    await rig.until(() => expect(standby.status()).toMatchObject({ role: 'leader', state: 'running' }), 20_000);
    await w.issue('si2');
    await rig.until(() => expect(rig.events('invoice-si2').map((e) => e.type)).toEqual(['InvoiceImported', 'InvoiceIssued']));
    await rig.until(() => expect(standby.status().transactions.inFlight).toBe(0));
    await standby.stop();
    await standing;
    expect(standbyLog.lines.filter((l) => l.message === 'snapshot: decision').map((l) => l.fields?.['action'])).not.toContain('initial-snapshot');

    const report = await verifyDestination({
      source: { connection: rig.captureUrl, slot: ref, publication: rig.publication },
      destination: { connectionString: rig.kdb.connectionString },
      mappers,
      assembler: 'sbsnap',
      expectedBefore: reference.expectedBefore,
    });
    expect(report.ok, formatDestinationReport(report, { maxListed: 10 })).toBe(true);
  });
});
