// The consumer kit's pure parts: projection definitions, partition hashing, source-version order,
// and event metadata (as the assembler writes it) read into typed fields.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { invoicingUpcasters } from '../../examples/invoicing/upcasters.js';
import { ContractError } from '../../src/contracts/errors.js';
import { loadContractStep } from '../../src/consumer/contract-step.js';
import {
  compareSourceVersions,
  createProjectionRunner,
  defineProjection,
  fnv1a32,
  partitionOf,
  ProjectionConfigError,
  toProjectionEvent,
  versionsComparable,
  type SourceVersion,
} from '../../src/consumer/index.js';
import { defineMapper } from '../../src/mapping/define-mapper.js';
import { mapUnit } from '../../src/mapping/map-unit.js';
import { flatReceiptMetadata, receiptAt, receiptToMetadata } from '../../src/sink/receipt.js';
import { encodeCheckpoint } from '../../src/source/position.js';
import { insert, snapshotRecord, transaction } from '../../src/testing/mapper-kit.js';

const handlers = { Deposited: () => undefined };

describe('defineProjection', () => {
  it('fills in the defaults', () => {
    const p = defineProjection({ name: 'accounts', from: { categories: ['account'] }, handlers });
    expect(p).toMatchObject({ batchSize: 100, onError: 'halt', partition: { count: 1, index: 0 }, retry: { attempts: 3, initialDelayMs: 100, maxDelayMs: 5000 }, types: [] });
  });

  it.each([
    [{ name: 'Bad Name', from: { categories: ['a'] }, handlers }, 'name'],
    [{ name: 'p', from: {}, handlers }, 'from'],
    [{ name: 'p', from: { categories: ['account-'] }, handlers }, 'from.categories'],
    [{ name: 'p', from: { types: ['Other'] }, handlers }, 'from.types'],
    [{ name: 'p', from: { categories: ['a'] }, handlers: { X: 1 } }, 'handlers.X'],
    [{ name: 'p', from: { categories: ['a'] }, handlers, batchSize: 0 }, 'batchSize'],
    [{ name: 'p', from: { categories: ['a'] }, handlers, onError: 'skip' }, 'onError'],
    [{ name: 'p', from: { categories: ['a'] }, handlers, partition: { count: 2, index: 2 } }, 'partition.index'],
    [{ name: 'p', from: { categories: ['a'] }, handlers, retry: { initialDelayMs: 10, maxDelayMs: 5 } }, 'retry.maxDelayMs'],
  ])('refuses %j, naming %s', (definition, field) => {
    let error: unknown;
    try {
      defineProjection(definition as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProjectionConfigError);
    expect((error as ProjectionConfigError).details.field).toBe(field);
  });
});

describe('partitions', () => {
  it('FNV-1a 32-bit matches the reference values', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('spreads streams over the partitions, each stream always to the same one', () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 300; i++) counts[partitionOf(`invoice-inv_${i}`, 3)]!++;
    expect(counts.every((n) => n > 50)).toBe(true);
    expect(partitionOf('invoice-inv_7', 3)).toBe(partitionOf('invoice-inv_7', 3));
    expect(partitionOf('invoice-inv_7', 1)).toBe(0);
  });
});

describe('source versions', () => {
  const change = (lsn: string, ordinal: number, systemId = 's1'): SourceVersion => ({ systemId, lsn, kind: 'change', generation: null, sequence: null, ordinal });
  const snap = (lsn: string, generation: string, sequence: number): SourceVersion => ({ systemId: 's1', lsn, kind: 'snapshot', generation, sequence, ordinal: 0 });

  it('orders by LSN as numbers, then ordinal', () => {
    expect(compareSourceVersions(change('0/9', 5), change('0/10', 0))).toBeLessThan(0);
    expect(compareSourceVersions(change('0/10', 1), change('0/10', 0))).toBeGreaterThan(0);
    expect(compareSourceVersions(change('0/10', 1), change('0/10', 1))).toBe(0);
  });

  it('puts a snapshot record before a change at the same LSN; records by generation, then sequence', () => {
    expect(compareSourceVersions(snap('0/10', 'g1', 9), change('0/10', 0))).toBeLessThan(0);
    expect(compareSourceVersions(snap('0/10', '9', 0), snap('0/10', '10', 0))).toBeLessThan(0);
    expect(compareSourceVersions(snap('0/10', 'g1', 2), snap('0/10', 'g1', 3))).toBeLessThan(0);
  });

  it('does not compare versions of different source systems', () => {
    expect(versionsComparable(change('0/1', 0, 's1'), change('0/1', 0, 's2'))).toBe(false);
    expect(() => compareSourceVersions(change('0/1', 0, 's1'), change('0/1', 0, 's2'))).toThrow(RangeError);
  });
});

describe('event metadata → typed fields', () => {
  const mapper = defineMapper({
    name: 'ledger',
    tables: { 'public.ledger': { columns: ['id', 'account', 'amount'] } },
    map: (tx) => [...tx.each()].map((c) => ({ stream: `account-${String(c.after!['account'])}`, type: 'Deposited', version: 2, data: { amount: c.after!['amount'] } })),
  });
  const context = { assembler: 'asm', sourceIdentity: '7400' };
  const recorded = (metadata: Record<string, string>, id: string) => ({
    id,
    type: 'Deposited',
    stream: 'account-a1',
    revision: 3n,
    position: { commit: 500n, prepare: 500n },
    data: { amount: 5 },
    metadata,
  });

  it('a change event: source position, transaction place, entity, contract version, source version', () => {
    const tx = transaction([insert('public.ledger', { id: 1, account: 'a1', amount: 5 }), insert('public.ledger', { id: 2, account: 'a1', amount: 6 })], { commitLsn: '0/1A2B', xid: 77, systemId: '7400' });
    const checkpoint = encodeCheckpoint({ systemId: '7400', timeline: 2, slot: 'ledger', commitLsn: '0/1A2B', xid: 77 });
    const { events } = mapUnit([mapper], { ...tx, position: { ...tx.position, checkpoint } }, context);
    const second = events[1]!;
    const metadata = { ...second.metadata, ...receiptToMetadata(receiptAt({ kind: 'transaction', assembler: 'asm', source: '7400', commitLsn: '0/1A2B', xid: 77 }, 1, 2)) };
    const event = toProjectionEvent(recorded(metadata, second.id));
    expect(event).toMatchObject({
      id: second.id,
      version: 2,
      source: { origin: 'change', checkpoint, commitLsn: '0/1A2B', xid: 77, systemId: '7400', timeline: 2 },
      transaction: { index: 1, count: 2, correlationId: '7400:0/1A2B:77' },
      entity: { type: 'account', id: 'a1' },
      sourceVersion: { systemId: '7400', lsn: '0/1A2B', kind: 'change', ordinal: 1 },
    });
  });

  it('a snapshot event: generation, the LSN and sequence from its receipt', () => {
    const { events } = mapUnit([mapper], snapshotRecord('public.ledger', { id: 1, account: 'a1', amount: 5 }, { generation: 'g3' }), context);
    const receipt = receiptAt({ kind: 'snapshot', assembler: 'asm', source: '7400', lsn: '0/500', generation: 'g3', sequence: 12, table: 'public.ledger', key: '1' }, 0, 1);
    const event = toProjectionEvent(recorded({ ...events[0]!.metadata, ...receiptToMetadata(receipt) }, events[0]!.id));
    expect(event.source).toEqual({ origin: 'snapshot', generation: 'g3', lsn: '0/500', sequence: 12, systemId: '7400' });
    expect(event.sourceVersion).toEqual({ systemId: '7400', lsn: '0/500', kind: 'snapshot', generation: 'g3', sequence: 12, ordinal: 0 });
    // Written by an earlier version (flat receipt.* keys): read the same.
    const old = toProjectionEvent(recorded({ ...events[0]!.metadata, ...flatReceiptMetadata(receipt) }, events[0]!.id));
    expect(old.source).toEqual(event.source);
    expect(old.sourceVersion).toEqual(event.sourceVersion);
  });

  it('a snapshot event says which kind of generation made it (snapshot.kind): initial, or a deliberate ad hoc re-reading', () => {
    const adHoc = mapUnit([mapper], { ...snapshotRecord('public.ledger', { id: 1, account: 'a1', amount: 5 }, { generation: 'g4' }), snapshotKind: 'ad_hoc' }, context);
    expect(adHoc.events[0]!.metadata['snapshot.kind']).toBe('ad_hoc');
    const receipt = receiptAt({ kind: 'snapshot', assembler: 'asm', source: '7400', lsn: '0/600', generation: 'g4', sequence: 1, table: 'public.ledger', key: '1' }, 0, 1);
    const event = toProjectionEvent(recorded({ ...adHoc.events[0]!.metadata, ...receiptToMetadata(receipt) }, adHoc.events[0]!.id));
    expect(event.source).toEqual({ origin: 'snapshot', generation: 'g4', lsn: '0/600', sequence: 1, systemId: '7400', kind: 'ad_hoc' });
  });

  it('an event not written by the assembler: no source, no version (receipts guard it)', () => {
    const event = toProjectionEvent(recorded({ note: 'hand-written' }, '0e2f7f3c-6d0e-4c0b-9f4e-2a8f6b7d9c11'));
    expect(event).toMatchObject({ source: { origin: 'unknown' }, transaction: null, entity: null, sourceVersion: null, version: null });
  });
});

describe('contracts on the receiving side', () => {
  const v1 = {
    invoiceId: 'inv_1',
    customerId: 'cus_1',
    number: 'INV-1',
    currency: 'EUR',
    total: '40.00',
    issuedAt: '2026-03-01T09:30:00Z',
    lines: [{ lineNo: 1, description: 'widget', quantity: 2, unitPrice: '20.00', amount: '40.00' }],
  };
  const issued = (data: unknown, contract: string) =>
    toProjectionEvent({ id: '0e2f7f3c-6d0e-4c0b-9f4e-2a8f6b7d9c12', type: 'InvoiceIssued', stream: 'invoice-inv_1', revision: 0n, position: { commit: 1n, prepare: 1n }, data, metadata: { contract } });

  it('validates against the recorded version and upcasts to the newest', async () => {
    const step = await loadContractStep({ dir: fileURLToPath(new URL('../../contracts/invoicing', import.meta.url)), upcasters: invoicingUpcasters });
    const event = step(issued(v1, 'InvoiceIssued@1'));
    expect(event.version).toBe(2);
    expect(event.data).toMatchObject({ total: { amount: '40.00', currency: 'EUR' }, dueDate: null });
    expect(() => step(issued({ ...v1, currency: 'euro' }, 'InvoiceIssued@1'))).toThrow(ContractError);
    expect(() => step(issued(v1, 'Other@1'))).toThrow(/names no contract version/);
  });
});

describe('createProjectionRunner options', () => {
  const projection = defineProjection({ name: 'opts', from: { categories: ['account'] }, handlers: {} });
  const base = { projection, postgres: 'postgresql://app@localhost/app', kurrentdb: 'kurrentdb://localhost:2113?tls=false' };
  it('names a bad standby option before connecting to anything', () => {
    expect(() => createProjectionRunner({ ...base, standby: 'yes' as never })).toThrow(/standby must be true or false/);
    expect(() => createProjectionRunner({ ...base, standby: true, standbyPollMs: 5 })).toThrow(/standbyPollMs must be an integer ≥ 10 \(found 5\)/);
    expect(createProjectionRunner({ ...base, standby: true, standbyPollMs: 50 }).status().state).toBe('idle');
  });
});
