// The runbook's lost-slot procedure (docs/runbook.md, "EventAssemblerSlotLost"), executed step by
// step through the real CLI on a PostgreSQL of its own (its max_slot_wal_keep_size is changed, so
// it must not be the shared server): the assembler (mode 'initial') runs, is stopped, WAL is
// written until the slot is lost; the runbook's slot query shows `lost`, the assembler refuses
// with REBUILD_NEEDED (exit 3); then the runbook's steps — raise the cap, restart with
// snapshot.mode 'when_needed' — bring the destination back as snapshot generation 2 on a new
// slot, and the destination check passes: generation 1 and what streamed before the loss,
// generation 2 of every row as it is now, and what streamed after, each exactly once and in order.
// The SQL the test runs is read from the runbook itself, so the runbook cannot drift from it.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/testing/postgres.js';
import {
  createReferenceSlotWithSnapshot, dropReferenceSlot, formatDestinationReport, readDestination, verifyDestination, type ExpectedEvent,
} from '../../src/testing/verify-destination.js';
import { createPipelineRig, rigEnv, startCli, TABLES, workload, writeRigConfig, type CliProcess, type PipelineRig } from './pipeline-rig.js';

const NAME = 'rb_lost';
const PREFIX = 'EA_RB';
const runbook = readFileSync(new URL('../../docs/runbook.md', import.meta.url), 'utf8');

/** The one ```sql block of the runbook that contains `marker`. */
function runbookSql(marker: string): string {
  const blocks = [...runbook.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => b.includes(marker));
  expect(blocks, `docs/runbook.md: one sql block with "${marker}"`).toHaveLength(1);
  return blocks[0]!;
}

/** A block's statements, one by one — as psql sends them (ALTER SYSTEM refuses a transaction block). */
function statements(block: string): string[] {
  return block.replace(/--[^\n]*/g, '').split(';').map((t) => t.trim()).filter(Boolean);
}

/** The runbook's "The slot" query, for this test's slot. */
const slotQuery = (slot: string) => runbookSql('FROM pg_replication_slots\nWHERE slot_name').replace("'shop_assembler'", `'${slot}'`);
/** The runbook's statements that raise the cap (reloadable). */
const raiseCap = runbookSql("ALTER SYSTEM SET max_slot_wal_keep_size = '100GB'");

interface SlotRow { slot_name: string; active: boolean; wal_status: string; invalidation_reason: string | null; retained_wal: string | null }

const servers: EmbeddedPostgres[] = [];
const rigs: PipelineRig[] = [];
const clis: CliProcess[] = [];
const dir = mkdtempSync(join(tmpdir(), 'ea-runbook-'));

afterAll(async () => {
  for (const cli of clis) if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGKILL');
  for (const r of rigs) await r.close();
  for (const s of servers) await s.destroy();
  rmSync(dir, { recursive: true, force: true });
});

function config(rig: PipelineRig, mode: 'initial' | 'when_needed'): string {
  return writeRigConfig(dir, rig, { name: NAME, envPrefix: PREFIX, connections: 'env-reference', statusIntervalMs: 500, snapshot: `{ mode: '${mode}', chunkSize: 16 }` });
}

function run(rig: PipelineRig, file: string): CliProcess {
  const cli = startCli(['run', '--config', file], rigEnv(rig, PREFIX));
  clis.push(cli);
  return cli;
}

/** SIGTERM: a graceful stop, exit 0. */
async function stop(cli: CliProcess): Promise<void> {
  cli.child.kill('SIGTERM');
  const code = await cli.exit(30_000);
  expect(code, cli.output()).toBe(0);
}

const messages = (cli: CliProcess) => cli.lines().map((l) => l['msg']);
const types = (rig: PipelineRig, stream: string) => rig.events(stream).map((e) => `${e.type}${e.metadata['snapshot.generation'] ? `@${e.metadata['snapshot.generation']}` : ''}`);

describe('runbook: a lost slot, rebuilt as the runbook says', () => {
  it('slot lost while the assembler was down → REBUILD_NEEDED (exit 3) → raise the cap, run with when_needed → generation 2, destination check passes', async () => {
    const server = await startEmbeddedPostgres();
    servers.push(server);
    const rig = await createPipelineRig(NAME, { server });
    rigs.push(rig);
    const slot = rig.slots[0]!;
    const w = workload(rig);
    const ignore = (s: string) => s.startsWith('$') || s === `event-assembler.checkpoint-${NAME}` || s === `event-assembler.snapshot-${NAME}`;
    const publication = rig.publication;

    // ── Before: an assembler in mode 'initial' captures, and is stopped. ──────────────────────────
    await w.customer('c1');
    await w.draft('i1', 'c1');
    await w.issue('i1');
    const ref1 = await createReferenceSlotWithSnapshot(rig.db.connectionString, 'rb_ref1', { mappers, assembler: NAME, generation: '1', tables: TABLES });
    const first = run(rig, config(rig, 'initial'));
    await rig.until(() => expect(types(rig, 'invoice-i1')).toEqual(['InvoiceImported@1']), 60_000);
    await w.draft('i2', 'c1');
    await rig.until(() => expect(types(rig, 'invoice-i2')).toEqual(['InvoiceDrafted']), 30_000);
    await stop(first);
    const before = await verifyDestination({ source: { connection: rig.db.connectionString, slot: ref1.slot, publication }, destination: { connectionString: rig.kdb.connectionString }, mappers, assembler: NAME, expectedBefore: ref1.expectedBefore });
    expect(before.ok, formatDestinationReport(before)).toBe(true);
    await dropReferenceSlot(rig.db.connectionString, ref1.slot);
    const beforeEvents: ExpectedEvent[] = (await readDestination(rig.kdb.connectionString, ignore)).map((e) => ({ id: e.id, stream: e.stream, type: e.type, data: e.data }));

    // ── The outage: a change the slot still records, then the cap, then WAL until the slot is lost. ─
    await w.pay('i1', 'p1');
    await rig.sql('CREATE TABLE filler (id int, pad text)');
    await server.setParameters({ max_slot_wal_keep_size: '1MB' });
    await rig.until(async () => {
      await rig.sql(`INSERT INTO filler SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g`);
      await rig.sql('SELECT pg_switch_wal()');
      await rig.sql('CHECKPOINT');
      const [row] = (await rig.sql('SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1', [slot])) as SlotRow[];
      expect(row?.wal_status).toBe('lost');
    }, 60_000);

    // ── Runbook step 1, confirm: the slot query says lost; the assembler refuses (exit 3). ─────────
    const [lost] = (await rig.sql(slotQuery(slot))) as SlotRow[];
    expect(lost).toMatchObject({ slot_name: slot, active: false, wal_status: 'lost', invalidation_reason: 'wal_removed' });
    // The same without SQL: `event-assembler status` (no running process needed) names it.
    const offline = startCli(['status', '--config', config(rig, 'initial'), '--json'], rigEnv(rig, PREFIX));
    expect(await offline.exit(60_000), offline.output()).toBe(0);
    expect(JSON.parse(offline.stdout())).toMatchObject({ slot: { walStatus: 'lost', active: false } });
    const refused = run(rig, config(rig, 'initial'));
    expect(await refused.exit(60_000), refused.output()).toBe(3);
    const fatal = refused.lines().find((l) => l['msg'] === 'assembler stopped after a fatal error');
    expect(fatal?.['error']).toMatchObject({ code: 'REBUILD_NEEDED' });
    const said = String((fatal?.['error'] as { message?: unknown } | undefined)?.message);
    expect(said).toContain(`replication slot "${slot}" was invalidated (wal_status = 'lost')`);
    expect(said).toContain("Rebuild: start the assembler with snapshot.mode 'when_needed'");

    // ── Step 2, room for the rebuild: the runbook's statements raise the cap (reloadable). ─────────
    for (const statement of statements(raiseCap)) await rig.sql(statement);
    const [cap] = (await rig.sql(`SELECT setting, unit FROM pg_settings WHERE name = 'max_slot_wal_keep_size'`)) as { setting: string; unit: string }[];
    expect(`${cap!.setting}${cap!.unit}`).toBe(`${100 * 1024}MB`);

    // ── Step 4, rebuild: snapshot.mode 'when_needed' in the configuration, then run. ───────────────
    expect(runbook).toContain("set `snapshot: { mode: 'when_needed' }` in the assembler's configuration");
    expect(runbook).toContain('event-assembler run --config shop.config.ts');
    const rebuild = run(rig, config(rig, 'when_needed'));
    await rig.until(() => expect(messages(rebuild)).toContain('assembler started'), 60_000);
    const warning = rebuild.lines().find((l) => l['msg'] === 'snapshot: the stored position cannot be served; starting a new snapshot generation with a new slot');
    expect(warning).toMatchObject({ level: 'warn', code: 'SLOT_LOST', previousGeneration: '1', generation: '2' });
    expect(rebuild.lines().find((l) => l['msg'] === 'snapshot: complete')).toMatchObject({ generation: '2' });
    // What the slot lost is back as generation 2: the invoice as it is now, the payment made during the outage.
    expect(types(rig, 'invoice-i1')).toEqual(['InvoiceImported@1', 'InvoiceImported@2']);
    expect(rig.events('invoice-i1')[1]!.data).toMatchObject({ invoiceId: 'i1', status: 'paid' });

    // ── Step 5, verify: a new slot, reserved and active. ────────────────────────────────────────────
    await rig.until(async () => {
      const [row] = (await rig.sql(slotQuery(slot))) as SlotRow[];
      expect(row).toMatchObject({ slot_name: slot, active: true, wal_status: 'reserved', invalidation_reason: null });
    });

    // The runbook's other queries: who streams the slot (the assembler, as the capture role), and the settings.
    const [who] = (await rig.sql(runbookSql('FROM pg_stat_replication').replace("'shop_assembler'", `'${slot}'`))) as { usename: string }[];
    expect(who?.usename).toMatch(/^cap_/);
    const settings = (await rig.sql(runbookSql('FROM pg_settings'))) as { name: string; setting: string }[];
    expect(settings.find((r) => r.name === 'max_slot_wal_keep_size')?.setting).toBe(String(100 * 1024));

    // The expectation for generation 2: the rows as the new slot's snapshot saw them (nothing was
    // written since), then every change from here on through a reference slot.
    const ref2 = await createReferenceSlotWithSnapshot(rig.db.connectionString, 'rb_ref2', { mappers, assembler: NAME, generation: '2', tables: TABLES });
    expect(ref2.rows).toBeGreaterThan(0);
    await w.void('i2');
    await w.draft('i3', 'c1');
    await rig.until(() => expect(types(rig, 'invoice-i2')).toEqual(['InvoiceDrafted', 'InvoiceImported@2', 'InvoiceVoided']), 30_000);
    await rig.until(() => expect(types(rig, 'invoice-i3')).toEqual(['InvoiceDrafted']), 30_000);
    await stop(rebuild);
    const stopped = rebuild.lines().find((l) => l['msg'] === 'assembler stopped');
    expect(stopped?.['snapshot']).toMatchObject({ action: 'new-generation', generation: '2', code: 'SLOT_LOST', finished: true });

    // ── The destination check: before + generation 2 + after, each event exactly once, in order. ──
    const report = await verifyDestination({
      source: { connection: rig.db.connectionString, slot: ref2.slot, publication },
      destination: { connectionString: rig.kdb.connectionString },
      mappers,
      assembler: NAME,
      expectedBefore: [...beforeEvents, ...ref2.expectedBefore],
    });
    expect(report.ok, formatDestinationReport(report)).toBe(true);
    // Generation 1 held i1; generation 2 holds i1 and i2.
    expect(report.byType['InvoiceImported']).toEqual({ expected: 3, actual: 3 });
    await dropReferenceSlot(rig.db.connectionString, ref2.slot);
  }, 240_000);
});
