// The invoicing example's projections (examples/invoicing/projections) on a real PostgreSQL: a
// source history — seeded invoices read by a snapshot, then the application's transactions — is
// mapped by the example's real mappers, appended by the real sink to an in-memory KurrentDB, read
// back as handlers receive it (validated and upcast by the contracts), and applied with the kit's
// `applyBatch` in small batches. The balances must be what the source history says, and every kind
// of replay (from the checkpoint, from position 0 with receipts, from 0 after receipts were pruned)
// must leave them unchanged.
import { fileURLToPath } from 'node:url';
import { FORWARDS, KurrentDBClient, START } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { createInvoicingMappers } from '../../examples/invoicing/index.js';
import { createInvoicingProjections } from '../../examples/invoicing/projections/index.js';
import { invoicingUpcasters } from '../../examples/invoicing/upcasters.js';
import { applyBatch, ensureStore, recordedInput, storeTables, toProjectionEvent, type Projection, type ProjectionEvent } from '../../src/consumer/index.js';
import { loadContractStep, type ContractStep } from '../../src/consumer/contract-step.js';
import { mapUnit, type AnyMapper } from '../../src/mapping/index.js';
import { createKurrentDBSink } from '../../src/sink/index.js';
import type { Sink } from '../../src/sink/types.js';
import { encodeCheckpoint } from '../../src/source/position.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { del, insert, snapshotRecord, transaction, update } from '../../src/testing/mapper-kit.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';

const SYSTEM_ID = '7400000000000000042';
const ASSEMBLER = 'invoicing-test';
const CONTRACTS = fileURLToPath(new URL('../../contracts/invoicing', import.meta.url));
const SCHEMA = 'invoicing_projections';
const tables = storeTables('invoicing_state');

type Row = Record<string, unknown>;
const invoiceRow = (id: string, customer: string, status: string, currency: string, total = '0.00', number: string | null = null): Row => ({
  id,
  customer_id: customer,
  number,
  status,
  currency,
  total,
  issued_at: number ? '2026-01-15T10:00:00.000000Z' : null,
  due_date: number ? '2026-02-14' : null,
  void_reason: status === 'void' ? 'duplicate' : null,
  created_at: '2026-01-15T09:00:00.000000Z',
  updated_at: '2026-01-15T09:00:00.000000Z',
});
const line = (invoiceId: string, lineNo: number, quantity: number, unitPrice: string, amount: string) =>
  insert('public.invoice_line', { invoice_id: invoiceId, line_no: lineNo, description: 'consulting hour', quantity, unit_price: unitPrice, amount }, { key: ['invoice_id', 'line_no'] });

/** The application's transactions: draft, issue (lines + status in one transaction), pay (payment + status), void, discard (delete a draft). */
const draft = (id: string, customer: string, currency: string) => [insert('public.invoice', invoiceRow(id, customer, 'draft', currency))];
function issue(id: string, customer: string, currency: string, number: string, lines: readonly [number, string, string][]) {
  const total = lines.reduce((cents, [, , amount]) => cents + Math.round(Number(amount) * 100), 0);
  const after = invoiceRow(id, customer, 'issued', currency, `${Math.floor(total / 100)}.${String(total % 100).padStart(2, '0')}`, number);
  return [...lines.map(([q, unit, amount], i) => line(id, i + 1, q, unit, amount)), update('public.invoice', invoiceRow(id, customer, 'draft', currency), after)];
}
function pay(id: string, customer: string, currency: string, total: string, paymentId: string) {
  const issued = invoiceRow(id, customer, 'issued', currency, total, `N-${id}`);
  return [
    insert('public.payment', { id: paymentId, invoice_id: id, amount: total, currency, paid_at: '2026-01-20T10:00:00.000000Z' }),
    update('public.invoice', issued, { ...issued, status: 'paid' }),
  ];
}
function voidInvoice(id: string, customer: string, currency: string, from: 'draft' | 'issued', total = '0.00') {
  const before = invoiceRow(id, customer, from, currency, total, from === 'issued' ? `N-${id}` : null);
  return [update('public.invoice', before, { ...before, status: 'void', void_reason: 'customer cancelled' })];
}
/** REPLICA IDENTITY FULL: the delete carries the whole old row. */
const discard = (id: string, customer: string, currency: string) => [del('public.invoice', invoiceRow(id, customer, 'draft', currency))];

/** Invoices that existed before capture began: read by the initial snapshot (InvoiceImported). */
const SEEDED = [
  invoiceRow('inv_s1', 'cus_1', 'issued', 'EUR', '100.00', 'N-inv_s1'),
  invoiceRow('inv_s2', 'cus_1', 'paid', 'EUR', '50.00', 'N-inv_s2'),
  invoiceRow('inv_s3', 'cus_2', 'void', 'USD', '20.00', 'N-inv_s3'),
  invoiceRow('inv_s4', 'cus_2', 'draft', 'USD'),
];

/** Then, in commit order. Amounts such as 0.10 + 0.20 would not add up in floating point. */
const HISTORY = [
  draft('inv_1', 'cus_1', 'EUR'),
  issue('inv_1', 'cus_1', 'EUR', 'N-inv_1', [[2, '12.50', '25.00'], [1, '10.10', '10.10']]), // 35.10
  pay('inv_1', 'cus_1', 'EUR', '35.10', 'pay_1'),
  pay('inv_s1', 'cus_1', 'EUR', '100.00', 'pay_2'), // an imported issued invoice, paid live
  draft('inv_2', 'cus_2', 'USD'),
  issue('inv_2', 'cus_2', 'USD', 'N-inv_2', [[1, '0.10', '0.10'], [1, '0.20', '0.20']]), // 0.30
  voidInvoice('inv_2', 'cus_2', 'USD', 'issued', '0.30'),
  draft('inv_3', 'cus_3', 'SEK'),
  voidInvoice('inv_3', 'cus_3', 'SEK', 'draft'),
  draft('inv_4', 'cus_3', 'SEK'),
  issue('inv_4', 'cus_3', 'SEK', 'N-inv_4', [[1, '1000.01', '1000.01']]), // read back as a stored InvoiceIssued v1
  draft('inv_5', 'cus_1', 'EUR'),
  issue('inv_5', 'cus_1', 'EUR', 'N-inv_5', [[1, '0.10', '0.10'], [1, '0.20', '0.20'], [1, '0.40', '0.40']]), // 0.70
  discard('inv_s4', 'cus_2', 'USD'), // an imported draft, discarded live
  draft('inv_6', 'cus_4', 'EUR'),
  discard('inv_6', 'cus_4', 'EUR'), // cus_4's only invoice: no summary row is left
];

/** What the source history says: per invoice status, paid and outstanding; per customer the summary. */
const EXPECTED_INVOICES = [
  { invoice_id: 'inv_1', customer_id: 'cus_1', status: 'paid', total: '35.10', paid: '35.10', outstanding: '0.00' },
  { invoice_id: 'inv_2', customer_id: 'cus_2', status: 'void', total: '0.30', paid: '0.00', outstanding: '0.00' },
  { invoice_id: 'inv_3', customer_id: 'cus_3', status: 'void', total: '0.00', paid: '0.00', outstanding: '0.00' },
  { invoice_id: 'inv_4', customer_id: 'cus_3', status: 'issued', total: '1000.01', paid: '0.00', outstanding: '1000.01' },
  { invoice_id: 'inv_5', customer_id: 'cus_1', status: 'issued', total: '0.70', paid: '0.00', outstanding: '0.70' },
  { invoice_id: 'inv_s1', customer_id: 'cus_1', status: 'paid', total: '100.00', paid: '100.00', outstanding: '0.00' },
  { invoice_id: 'inv_s2', customer_id: 'cus_1', status: 'paid', total: '50.00', paid: '50.00', outstanding: '0.00' },
  { invoice_id: 'inv_s3', customer_id: 'cus_2', status: 'void', total: '20.00', paid: '0.00', outstanding: '0.00' },
];
const EXPECTED_CUSTOMERS = [
  { customer_id: 'cus_1', invoices: 4, total_issued: '185.80', total_paid: '185.10', outstanding: '0.70' },
  { customer_id: 'cus_2', invoices: 2, total_issued: '0.00', total_paid: '0.00', outstanding: '0.00' },
  { customer_id: 'cus_3', invoices: 2, total_issued: '1000.01', total_paid: '0.00', outstanding: '1000.01' },
];

/** Maps and appends the snapshot and the history the way the assembler does; returns the invoice events as handlers receive them before contracts. */
async function writeHistory(sink: Sink, kdb: InMemoryKurrentDB, mappers: readonly AnyMapper[]): Promise<ProjectionEvent[]> {
  const context = { assembler: ASSEMBLER, sourceIdentity: SYSTEM_ID };
  for (const [sequence, row] of SEEDED.entries()) {
    const record = snapshotRecord('public.invoice', row, { generation: '1' });
    const { events } = mapUnit(mappers, record, context);
    await sink.append({ position: { kind: 'snapshot', snapshotGeneration: '1', lsn: '0/1000', sequence, table: 'public.invoice', key: JSON.stringify({ id: row['id'] }), systemId: SYSTEM_ID }, events });
  }
  for (const [i, changes] of HISTORY.entries()) {
    const commitLsn = `0/${(0x2000 + i * 0x100).toString(16).toUpperCase()}`;
    const xid = 5000 + i;
    const checkpoint = encodeCheckpoint({ systemId: SYSTEM_ID, timeline: 1, slot: 'invoicing', commitLsn, xid });
    const base = transaction(changes, { commitLsn, xid, systemId: SYSTEM_ID, slot: 'invoicing' });
    const { events } = mapUnit(mappers, { ...base, position: { ...base.position, checkpoint } }, context);
    await sink.append({ position: { checkpoint, commitLsn, xid, systemId: SYSTEM_ID }, events });
  }
  const reader = KurrentDBClient.connectionString(kdb.connectionString);
  const out: ProjectionEvent[] = [];
  try {
    for await (const resolved of reader.readAll({ fromPosition: START, direction: FORWARDS })) {
      const input = recordedInput(resolved);
      if (input?.stream.startsWith('invoice-')) out.push(toProjectionEvent(input));
    }
  } finally {
    await reader.dispose();
  }
  return out.map(storedAsV1('inv_4'));
}

/** inv_4's InvoiceIssued as an event stored before v2 (`total` a string beside `currency`, no `dueDate`): the contracts upcast it. */
function storedAsV1(invoiceId: string) {
  return (event: ProjectionEvent): ProjectionEvent => {
    if (event.type !== 'InvoiceIssued' || event.stream !== `invoice-${invoiceId}`) return event;
    const { total, dueDate: _dueDate, ...rest } = event.data as { total: { amount: string; currency: string }; dueDate: string | null };
    return { ...event, version: 1, data: { ...rest, currency: total.currency, total: total.amount }, metadata: { ...event.metadata, contract: 'InvoiceIssued@1' } };
  };
}

describe('invoicing projections (invoices, customerSummary) through the kit', () => {
  let db: TestDatabase;
  let kdb: InMemoryKurrentDB;
  let sink: Sink;
  let client: pg.Client;
  let events: ProjectionEvent[];
  let contract: ContractStep;
  const { invoices, customerSummary } = createInvoicingProjections();

  const invoiceRows = async () =>
    (await client.query(`SELECT invoice_id, customer_id, status, total::text, paid::text, outstanding::text FROM "${SCHEMA}".invoices ORDER BY invoice_id`)).rows;
  const customerRows = async () =>
    (await client.query(`SELECT customer_id, invoices, total_issued::text, total_paid::text, outstanding::text FROM "${SCHEMA}".customer_summary ORDER BY customer_id`)).rows;
  const target = (projection: Projection<any>) => ({ projection, tables, schema: SCHEMA });

  /** Applies `events` in batches of `size`, as a runner would, and sums what the batches did. */
  async function applyAll(projection: Projection<any>, size: number, first: 'current' | null = 'current') {
    const totals = { applied: 0, position: 0, receipt: 0, entityVersion: 0 };
    for (let i = 0; i < events.length; i += size) {
      const out = await applyBatch(client, target(projection), i === 0 ? first : 'current', events.slice(i, i + size), contract);
      totals.applied += out.applied;
      totals.position += out.skipped.position;
      totals.receipt += out.skipped.receipt;
      totals.entityVersion += out.skipped.entityVersion;
    }
    return totals;
  }
  const resetCheckpoints = () => client.query(`UPDATE ${tables.checkpoints} SET commit_position = NULL, prepare_position = NULL`);

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'inv_projections');
    kdb = await startInMemoryKurrentDB();
    sink = await createKurrentDBSink({ connectionString: kdb.connectionString, assembler: ASSEMBLER, checkpointStream: false });
    client = new pg.Client({ connectionString: db.connectionString });
    await client.connect();
    events = await writeHistory(sink, kdb, createInvoicingMappers('public'));
    contract = await loadContractStep({ dir: CONTRACTS, upcasters: invoicingUpcasters });
    await ensureStore(client, tables);
    await client.query(`CREATE SCHEMA "${SCHEMA}"`);
    for (const projection of [invoices, customerSummary]) await projection.setup!(client, SCHEMA);
    for (const projection of [invoices, customerSummary]) await applyAll(projection, 4);
  });

  afterAll(async () => {
    await client?.end();
    await sink?.close();
    await kdb?.close();
    await db?.drop();
  });

  it('reads every event the history makes, with entity and source version (so each replay guard applies)', () => {
    expect(events.map((e) => e.type).sort()).toEqual(
      [...Array(4).fill('InvoiceImported'), ...Array(6).fill('InvoiceDrafted'), ...Array(4).fill('InvoiceIssued'), ...Array(2).fill('InvoicePaid'), ...Array(2).fill('InvoiceVoided'), ...Array(2).fill('InvoiceDiscarded')].sort(),
    );
    for (const e of events) expect(e.entity?.type === 'invoice' && e.sourceVersion !== null, `${e.type} ${e.stream}`).toBe(true);
    expect(events.filter((e) => e.version === 1 && e.type === 'InvoiceIssued')).toHaveLength(1);
  });

  it('invoices: status, paid and the outstanding balance are what the source history says (numeric, to the cent)', async () => {
    expect(await invoiceRows()).toEqual(EXPECTED_INVOICES);
  });

  it('customerSummary: invoices, total issued, total paid and outstanding per customer', async () => {
    expect(await customerRows()).toEqual(EXPECTED_CUSTOMERS);
  });

  it('a replay from the checkpoint, from position 0 (receipts), and from 0 after receipts were pruned (entity versions) changes nothing', async () => {
    const n = events.length;
    for (const projection of [invoices, customerSummary]) {
      expect(await applyAll(projection, 5)).toEqual({ applied: 0, position: n, receipt: 0, entityVersion: 0 });
    }
    await resetCheckpoints();
    for (const projection of [invoices, customerSummary]) {
      expect(await applyAll(projection, 3, null)).toEqual({ applied: 0, position: 0, receipt: n, entityVersion: 0 });
    }
    await resetCheckpoints();
    await client.query(`DELETE FROM ${tables.receipts}`);
    for (const projection of [invoices, customerSummary]) {
      expect(await applyAll(projection, 7, null)).toEqual({ applied: 0, position: 0, receipt: 0, entityVersion: n });
    }
    expect(await invoiceRows()).toEqual(EXPECTED_INVOICES);
    expect(await customerRows()).toEqual(EXPECTED_CUSTOMERS);
  });

  it('an InvoicePaid for an invoice the projection never saw halts the batch (nothing applied) instead of losing the effect', async () => {
    const paid = events.find((e) => e.type === 'InvoicePaid')!;
    const stray: ProjectionEvent = {
      ...paid,
      id: '00000000-0000-5000-8000-000000000001',
      stream: 'invoice-inv_unknown',
      entity: { type: 'invoice', id: 'inv_unknown' },
      position: { commit: paid.position.commit + 1_000_000n, prepare: paid.position.prepare + 1_000_000n },
      data: { ...(paid.data as object), invoiceId: 'inv_unknown' },
    };
    const failure = await applyBatch(client, target(invoices), 'current', [stray], contract).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect(String((failure as Error).cause)).toMatch(/InvoicePaid for invoice inv_unknown, which the invoices projection does not hold/);
    expect(await invoiceRows()).toEqual(EXPECTED_INVOICES);
  });
});
