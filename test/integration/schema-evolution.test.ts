// Schema evolution under load (issue 17): while the invoicing workload writes all along, the
// shape of a captured table changes the ways it does in production — a column added, a NOT NULL
// column with a default, a column no mapper reads dropped, a type changed, an allowlisted column
// renamed or dropped, a table added to the publication, a captured table renamed. Each case holds what docs/running.md
// ("Schema changes while streaming") says: nothing to do; the contract change surfaced; or a halt
// naming the mapper and the column, and after the mapper's update and a restart nothing lost —
// the halted transaction was not acknowledged past, and it and everything after it land exactly
// once. At the end the invoicing line reconciles and every event id is unique.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcile } from '../../src/reconcile/index.js';
import { checkpointStreamName } from '../../src/sink/index.js';
import { compareLsn } from '../../src/source/position.js';
import { createInvoicingReconcilers } from '../../examples/invoicing/index.js';
import { createInvoicingWorkload, type InvoicingWorkload } from '../../examples/invoicing/workload.js';
import { createPipelineRig, type PipelineRig } from './pipeline-rig.js';
import { addShipmentTable, createSchemaLine, shipmentContracts, shipmentsMapper, SHIPMENT, type SchemaLine } from './schema-evolution-rig.js';

let dir: string;
let rig: PipelineRig;
let line: SchemaLine;
let live: InvoicingWorkload;
let liveRun: { abort: AbortController; done: Promise<unknown> };

const shipment = (id: string) => rig.events(`shipment-${id}`).map((e) => ({ type: e.type, data: e.data }));
const recorded = (id: string, carrier: string, weight: string | null) => ({ type: 'ShipmentRecorded', data: { shipmentId: id, carrier, weight } });
const insert = (id: string, carrier: string, weight: string | null, carrierColumn = 'carrier') =>
  rig.sql(`INSERT INTO ${SHIPMENT} (id, ${carrierColumn}${weight === null ? '' : ', weight'}) VALUES ($1, $2${weight === null ? '' : ', $3'})`, weight === null ? [id, carrier] : [id, carrier, weight]);
const slotLsn = async () => (await rig.slot(rig.slots[0]!)).confirmed_flush_lsn;
/** The last position recorded in the checkpoint stream. */
const recordedLsn = () => (rig.events(checkpointStreamName(rig.name)).at(-1)!.data['position'] as { endLsn: string }).endLsn;

/** What each shipment stream must hold, as the cases deliver it (checked again at the end). */
const expectedStreams = new Map<string, readonly object[]>();

/** Waits until the shipment's stream holds exactly `expected`. */
async function delivered(id: string, expected: readonly object[]): Promise<void> {
  await rig.until(() => expect(shipment(id)).toHaveLength(expected.length));
  expect(shipment(id)).toEqual(expected);
  expectedStreams.set(id, expected);
}

/** The line went on by itself: still running, nothing but info lines. */
function stillRunning(): void {
  expect(line.assembler().status().state).toBe('running');
  expect(line.lines().filter((l) => l.level !== 'info').map((l) => l.message)).toEqual([]);
}

/**
 * The line halted with `code` on the transaction of shipment `id`: nothing of it landed; the error
 * line names the code. Returns the last position the halted run recorded as durable (the slot is
 * never acknowledged past it).
 */
async function haltedOn(id: string, code: string, details: object): Promise<string> {
  const error = await line.halted();
  expect(error.code).toBe(code);
  expect(error.details).toMatchObject(details);
  expect(line.lines().find((l) => l.message === 'assembler: fatal error, stopping')?.fields).toMatchObject({ error: { code } });
  expect(shipment(id)).toEqual([]);
  return recordedLsn();
}

/**
 * A restart after a halt streams from what the halted run recorded, also when its last
 * acknowledgement did not reach the slot (a replay of the old shape would stop the updated mapper).
 */
function streamsFrom(recorded: string): void {
  const started = line.lines().find((l) => l.message === 'assembler started')?.fields as { startLsn?: string; slotConfirmedFlushLsn: string };
  expect(started.startLsn ?? started.slotConfirmedFlushLsn).toBe(recorded);
}

/**
 * The halted transaction of shipment `id`, delivered after the restart, was not acknowledged: its
 * commit record starts at or after what the halted run recorded (and so acknowledged). A tie is
 * the boundary, not a loss: the recorded position is the end of the last durable transaction's
 * commit record, and under the concurrent workload that record can end exactly where this
 * transaction's commit record begins. PostgreSQL decodes a transaction again unless its commit
 * record starts before the position streaming starts from (`SnapBuildXactNeedsSkip`: `ptr <
 * start_decoding_at`); `delivered` shows it was.
 */
async function notAcknowledgedPast(id: string, haltedAt: string): Promise<void> {
  const commitLsn = rig.events(`shipment-${id}`)[0]!.metadata['source.commitLsn']!;
  expect(compareLsn(commitLsn, haltedAt)).toBeGreaterThanOrEqual(0);
  await rig.until(async () => expect(compareLsn(await slotLsn(), haltedAt)).toBeGreaterThanOrEqual(0));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ea-schema-'));
  rig = await createPipelineRig('schemaevo');
  await addShipmentTable(rig);
  line = createSchemaLine(rig, shipmentContracts(dir));
  live = createInvoicingWorkload({ connection: rig.db.connectionConfig(), seed: 17, idPrefix: 'live', concurrency: 2, rate: 40 });
  await line.start(shipmentsMapper());
  const abort = new AbortController();
  liveRun = { abort, done: live.run({ signal: abort.signal }) };
  await rig.until(() => expect(live.counts().transactions).toBeGreaterThan(10), 30_000);
}, 60_000);

afterAll(async () => {
  liveRun?.abort.abort();
  await liveRun?.done.catch(() => undefined);
  await line?.stop().catch(() => undefined);
  await live?.close().catch(() => undefined);
  await rig?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('schema changes while streaming, under load', { timeout: 60_000 }, () => {
  it('add a column, add a NOT NULL column with a default, drop a column no mapper reads, widen a precision: nothing to do', async () => {
    await insert('s1', 'dhl', '1.50');
    await delivered('s1', [recorded('s1', 'dhl', '1.50')]);

    await rig.sql(`ALTER TABLE ${SHIPMENT} ADD COLUMN tracking text`);
    await rig.sql(`INSERT INTO ${SHIPMENT} (id, carrier, weight, tracking) VALUES ('s2', 'ups', 2.00, 'TRK-2')`);
    // Not allowlisted: the new column reaches no event.
    await delivered('s2', [recorded('s2', 'ups', '2.00')]);

    await rig.sql(`ALTER TABLE ${SHIPMENT} ADD COLUMN priority int NOT NULL DEFAULT 0`);
    await rig.sql(`UPDATE ${SHIPMENT} SET carrier = 'fedex', priority = 2 WHERE id = 's1'`);
    await insert('s3', 'dhl', '3.00');
    await delivered('s1', [recorded('s1', 'dhl', '1.50'), { type: 'ShipmentChanged', data: { shipmentId: 's1', carrier: 'fedex', weight: '1.50' } }]);
    await delivered('s3', [recorded('s3', 'dhl', '3.00')]);

    await rig.sql(`ALTER TABLE ${SHIPMENT} DROP COLUMN note`);
    await insert('s4', 'dhl', '4.00');
    await delivered('s4', [recorded('s4', 'dhl', '4.00')]);

    // Precision only (the type modifier, not the type): the decoded value keeps its JSON type.
    await rig.sql(`ALTER TABLE ${SHIPMENT} ALTER COLUMN weight TYPE numeric(10,3)`);
    await rig.sql(`UPDATE ${SHIPMENT} SET weight = 4.125 WHERE id = 's4'`);
    await delivered('s4', [recorded('s4', 'dhl', '4.00'), { type: 'ShipmentChanged', data: { shipmentId: 's4', carrier: 'dhl', weight: '4.125' } }]);
    stillRunning();
  });

  it('a type change whose values keep their JSON type (text → varchar): a halt naming mapper and column; a restart goes on, events unchanged', async () => {
    await rig.sql(`ALTER TABLE ${SHIPMENT} ALTER COLUMN carrier TYPE varchar(40)`);
    await insert('s5', 'dhl', '5.00');
    const haltedAt = await haltedOn('s5', 'SCHEMA_REQUIRED_COLUMN_RETYPED', {
      table: SHIPMENT, column: 'carrier', mappers: ['shipments'], before: { typeName: 'text' }, after: { typeName: 'varchar' },
    });
    await line.start(shipmentsMapper());
    streamsFrom(haltedAt);
    await delivered('s5', [recorded('s5', 'dhl', '5.000')]);
    await notAcknowledgedPast('s5', haltedAt);
  });

  it('a type change that changes the JSON type (numeric → float8): the halt, then the contract surfaces it; the mapper updated, nothing lost', async () => {
    await rig.sql(`ALTER TABLE ${SHIPMENT} ALTER COLUMN weight TYPE float8`);
    await insert('s6', 'dhl', '6.25');
    const haltedAt = await haltedOn('s6', 'SCHEMA_REQUIRED_COLUMN_RETYPED', { column: 'weight', mappers: ['shipments'], before: { typeName: 'numeric' }, after: { typeName: 'float8' } });
    // The same mapper again: the float decodes as a number, which ShipmentRecorded v1 refuses.
    await line.start(shipmentsMapper());
    streamsFrom(haltedAt);
    const violationAt = await haltedOn('s6', 'CONTRACT_VIOLATION_HALT', { mapper: 'shipments', stream: 'shipment-s6', contract: 'ShipmentRecorded@1' });
    await line.start(shipmentsMapper({ weight: 'as-text' }));
    streamsFrom(violationAt);
    await delivered('s6', [recorded('s6', 'dhl', '6.25')]);
    await notAcknowledgedPast('s6', haltedAt);
  });

  it('renaming an allowlisted column: a halt naming mapper and column until the mapper reads the new name; then nothing lost', async () => {
    // The last transaction of the old shape right before the rename, all three in one round
    // trip (the COMMITs split them): s7 is still in flight when the line halts on s8, and its
    // acknowledgement does not reach the slot in time. Replayed to the updated mapper, its old
    // shape would stop it (carrier_name missing): the restart streams from the recorded position.
    await rig.sql(
      `INSERT INTO ${SHIPMENT} (id, carrier, weight) VALUES ('s7', 'dhl', 7.5); COMMIT;
       ALTER TABLE ${SHIPMENT} RENAME COLUMN carrier TO carrier_name; COMMIT;
       INSERT INTO ${SHIPMENT} (id, carrier_name, weight) VALUES ('s8', 'ups', 8.25)`,
    );
    const haltedAt = await haltedOn('s8', 'SCHEMA_REQUIRED_COLUMN_RENAMED', { column: 'carrier', after: { name: 'carrier_name' }, mappers: ['shipments'] });
    await delivered('s7', [recorded('s7', 'dhl', '7.5')]);
    expect(compareLsn(haltedAt, rig.events('shipment-s7')[0]!.metadata['source.commitLsn']!)).toBeGreaterThan(0);
    // A restart with the old mapper stops again: the column it allowlists is not there.
    await line.start(shipmentsMapper({ weight: 'as-text' }));
    streamsFrom(haltedAt);
    const missingAt = await haltedOn('s8', 'SCHEMA_REQUIRED_COLUMN_MISSING', { column: 'carrier', mappers: ['shipments'] });
    // The workload writes on while the line is down: the restart has a backlog to deliver.
    const before = live.counts().transactions;
    await rig.until(() => expect(live.counts().transactions).toBeGreaterThan(before + 5));
    await line.start(shipmentsMapper({ weight: 'as-text', carrier: 'carrier_name' }));
    streamsFrom(missingAt);
    await delivered('s8', [recorded('s8', 'ups', '8.25')]);
    await notAcknowledgedPast('s8', haltedAt);
  });

  it('dropping an allowlisted column: a halt naming mapper and column; the mapper updated, nothing lost', async () => {
    await rig.sql(`ALTER TABLE ${SHIPMENT} DROP COLUMN weight`);
    await insert('s9', 'dhl', null, 'carrier_name');
    const haltedAt = await haltedOn('s9', 'SCHEMA_REQUIRED_COLUMN_DROPPED', { table: SHIPMENT, column: 'weight', mappers: ['shipments'], after: null });
    await line.start(shipmentsMapper({ weight: 'none', carrier: 'carrier_name' }));
    streamsFrom(haltedAt);
    await delivered('s9', [recorded('s9', 'dhl', null)]);
    await notAcknowledgedPast('s9', haltedAt);
    await insert('s10', 'ups', null, 'carrier_name');
    await delivered('s10', [recorded('s10', 'ups', null)]);
  });

  it('a table added to the publication that no mapper reads: streaming goes on with a warning; the next start refuses until the publication agrees', async () => {
    await rig.sql('CREATE TABLE public.parcel (id int PRIMARY KEY, label text)');
    await rig.sql(`ALTER PUBLICATION ${rig.publication} ADD TABLE public.parcel`);
    await rig.sql(`INSERT INTO public.parcel VALUES (1, 'fragile')`);
    await insert('s11', 'dhl', null, 'carrier_name');
    await delivered('s11', [recorded('s11', 'dhl', null)]);
    expect(rig.businessStreams().filter((s) => !/^(customer|invoice|payment|shipment)-/.test(s))).toEqual([]);
    expect(line.assembler().status().state).toBe('running');
    expect(line.lines().filter((l) => l.level !== 'info')).toEqual([
      expect.objectContaining({ level: 'warn', message: expect.stringMatching(/^source: changes of a table that is not captured arrive/), fields: expect.objectContaining({ table: 'public.parcel' }) }),
    ]);
    // A restart (a deploy, a crash) meets the start-up check.
    await line.stop();
    await line.start(shipmentsMapper({ weight: 'none', carrier: 'carrier_name' }));
    const refusal = await line.halted();
    expect(refusal.code).toBe('SOURCE_PUBLICATION_MISMATCH');
    expect(refusal.details).toMatchObject({ extra: ['public.parcel'], missing: [] });
    await insert('s12', 'ups', null, 'carrier_name');
    await rig.sql(`ALTER PUBLICATION ${rig.publication} DROP TABLE public.parcel`);
    await line.start(shipmentsMapper({ weight: 'none', carrier: 'carrier_name' }));
    await delivered('s12', [recorded('s12', 'ups', null)]);
  });

  it('renaming a captured table: a halt naming both names and the mapper; the old mapper is refused at start; reading the new name, nothing lost', async () => {
    const renamed = 'public.shipment_v2';
    await rig.sql(`ALTER TABLE ${SHIPMENT} RENAME TO shipment_v2`);
    await rig.sql(`INSERT INTO ${renamed} (id, carrier_name) VALUES ('s13', 'dhl')`);
    const haltedAt = await haltedOn('s13', 'SCHEMA_CAPTURED_TABLE_RENAMED', { from: SHIPMENT, to: renamed, mappers: ['shipments'] });
    // Started as before, the mapper would read a table that no longer exists: refused before streaming.
    await line.start(shipmentsMapper({ weight: 'none', carrier: 'carrier_name' }));
    const refusal = await line.halted();
    expect(refusal.code).toBe('SOURCE_CHECKS_FAILED');
    expect(refusal.details).toMatchObject({
      problems: [{ code: 'SOURCE_TABLE_MISSING', table: SHIPMENT }, { code: 'SOURCE_PUBLICATION_MISMATCH', missing: [SHIPMENT], extra: [renamed] }],
    });
    await line.start(shipmentsMapper({ weight: 'none', carrier: 'carrier_name', table: renamed }));
    streamsFrom(haltedAt);
    await delivered('s13', [recorded('s13', 'dhl', null)]);
    await notAcknowledgedPast('s13', haltedAt);
  });

  it('afterwards the invoicing line is exact, and every shipment event landed once, in order', async () => {
    liveRun.abort.abort();
    await liveRun.done;
    const target = await rig.currentWalLsn();
    // A transaction after the last write: acknowledging it takes the slot past `target` without waiting for idle keepalives.
    await rig.sql('SELECT pg_logical_emit_message(true, $1, $2)', ['test.nudge', 'x']);
    await rig.until(async () => expect(compareLsn(await slotLsn(), target)).toBeGreaterThanOrEqual(0), 30_000);
    const report = await reconcile({
      assembler: rig.name,
      source: { connection: rig.captureUrl, publications: [rig.publication] },
      destination: { connectionString: rig.kdb.connectionString },
      reconcilers: createInvoicingReconcilers(),
      waitTimeoutMs: 30_000,
    });
    expect({ missing: report.missing, extra: report.extra, different: report.different, deletedButAlive: report.deletedButAlive }).toEqual({ missing: [], extra: [], different: [], deletedButAlive: [] });
    expect(report.ok).toBe(true);
    const invoices = report.summaries.find((s) => s.table === 'public.invoice')!;
    expect(invoices.rows).toBeGreaterThan(5);
    expect(invoices.agreeing).toBe(invoices.rows);

    // Each shipment stream holds exactly what its case saw delivered: nothing replayed twice since.
    expect(rig.businessStreams().filter((s) => s.startsWith('shipment-'))).toEqual([...expectedStreams.keys()].map((id) => `shipment-${id}`).sort());
    expect(expectedStreams.size).toBe(13);
    for (const [id, events] of expectedStreams) expect(shipment(id), id).toEqual(events);
    const ids = rig.businessStreams().flatMap((s) => rig.events(s).map((e) => e.id));
    expect(new Set(ids).size).toBe(ids.length);
    expect(rig.kdb.streamNames().filter((s) => s.startsWith('event-assembler.failed-'))).toEqual([]);
  });
});
