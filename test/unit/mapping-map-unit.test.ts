import { describe, expect, it } from 'vitest';
import { EventAssemblerError } from '../../src/errors.js';
import {
  contractViolationRecord,
  defineMapper,
  failedRecordsStream,
  MapperError,
  mapUnit,
  STANDARD_METADATA_KEYS,
  type FailureDiagnosis,
} from '../../src/mapping/index.js';
import { del, insert, snapshotRecord, transaction, update } from '../../src/testing/mapper-kit.js';

const context = { assembler: 'invoicing', sourceIdentity: '7000000000000000001' };

const drafts = defineMapper({
  name: 'drafts',
  tables: { 'public.invoice': { columns: ['id', 'status'] } },
  map: (tx) =>
    tx.inserts('public.invoice').map(({ after }) => ({
      stream: `invoice-${String(after.id)}`,
      type: 'InvoiceDrafted',
      version: 1,
      data: { invoiceId: after.id },
      metadata: { 'tenant': 'acme', mapper: 'spoofed', 'source.xid': '0' },
    })),
});

const lines = defineMapper({
  name: 'lines',
  tables: { 'public.invoice_line': { columns: ['invoice_id', 'line_no'] } },
  map: (tx) =>
    tx.inserts('public.invoice_line').map(({ after }) => ({
      stream: 'line-items',
      entity: { type: 'invoice', id: String(after.invoice_id) },
      type: 'LineAdded',
      version: 3,
      data: { lineNo: after.line_no },
    })),
});

const unit = transaction(
  [
    insert('public.invoice', { id: 'inv_1', status: 'draft' }),
    insert('public.invoice_line', { invoice_id: 'inv_1', line_no: 1 }, { key: ['invoice_id', 'line_no'] }),
    insert('public.invoice_line', { invoice_id: 'inv_1', line_no: 2 }, { key: ['invoice_id', 'line_no'] }),
  ],
  { commitLsn: '0/16B3748', xid: 744, commitTime: '2026-01-15T10:00:00.000000Z' },
);

describe('mapUnit: events and metadata', () => {
  it('an event without metadata of its own gets the standard keys in the same order as one with (own keys first)', () => {
    const withOwn = defineMapper({ ...lines, name: 'with-own', map: (tx) => [...lines.map(tx)].map((e) => ({ ...e, metadata: { note: 'x' } })) });
    const without = defineMapper({ ...lines, name: 'without' });
    const emptyOwn = defineMapper({ ...lines, name: 'empty-own', map: (tx) => [...lines.map(tx)].map((e) => ({ ...e, metadata: {} })) });
    const { events } = mapUnit([withOwn, without, emptyOwn], unit, context);
    const keysOf = (mapper: string) => events.filter((e) => e.metadata['mapper'] === mapper).map((e) => Object.keys(e.metadata));
    const expected = keysOf('with-own').map((keys) => keys.filter((k) => k !== 'note'));
    expect(expected[0]![0]).toBe('source.checkpoint');
    expect(keysOf('without')).toEqual(expected);
    expect(keysOf('empty-own')).toEqual(expected);
    for (const e of events) expect(Object.isFrozen(e.metadata)).toBe(true);
  });

  it('fills in the standard metadata as flat strings', () => {
    const { events, failed } = mapUnit([drafts, lines], unit, context);
    expect(failed).toEqual([]);
    expect(events[0]!.metadata).toEqual({
      tenant: 'acme',
      'source.checkpoint': unit.position.checkpoint,
      'source.commitLsn': '0/16B3748',
      'source.xid': '744',
      'source.commitTime': '2026-01-15T10:00:00.000000Z',
      origin: 'change',
      'source.tables': 'public.invoice',
      'source.operations': 'insert',
      '$correlationId': '7000000000000000001:0/16B3748:744',
      mapper: 'drafts',
      assembler: 'invoicing',
      'entity.type': 'invoice',
      'entity.id': 'inv_1',
      contract: 'InvoiceDrafted@1',
      'transaction.index': '0',
      'transaction.count': '3',
    });
    for (const event of events) {
      for (const value of Object.values(event.metadata)) expect(typeof value).toBe('string');
    }
  });

  it('source.tables and source.operations: the distinct values the mapper saw, sorted, comma-separated', () => {
    const everything = defineMapper({
      name: 'everything',
      tables: { 'public.invoice': { columns: ['id', 'status'] }, 'public.invoice_line': { columns: ['invoice_id', 'line_no'] }, 'public.payment': { columns: ['id'] } },
      map: (tx) => [{ stream: 'audit-1', type: 'Seen', version: 1, data: { n: [...tx.changes()].length } }],
    });
    const lineKey = { key: ['invoice_id', 'line_no'] };
    const seen = (...changes: Parameters<typeof transaction>[0]) => {
      const [event] = mapUnit([everything], transaction(changes, { commitLsn: '0/1', xid: 1 }), context).events;
      return [event!.metadata['source.tables'], event!.metadata['source.operations']];
    };
    // One value; two, seen in reverse order and repeated; three and more, in any order.
    expect(seen(insert('public.invoice', { id: 'a', status: 'draft' }))).toEqual(['public.invoice', 'insert']);
    expect(seen(update('public.invoice_line', null, { invoice_id: 'a', line_no: 1 }, lineKey), insert('public.invoice', { id: 'a', status: 'x' }), update('public.invoice_line', null, { invoice_id: 'a', line_no: 2 }, lineKey))).toEqual([
      'public.invoice,public.invoice_line',
      'insert,update',
    ]);
    expect(
      seen(
        update('public.payment', null, { id: 'p' }),
        insert('public.invoice_line', { invoice_id: 'a', line_no: 1 }, lineKey),
        del('public.invoice', { id: 'a', status: 'x' }),
        insert('public.payment', { id: 'q' }),
        del('public.invoice_line', { invoice_id: 'a', line_no: 1 }, lineKey),
      ),
    ).toEqual(['public.invoice,public.invoice_line,public.payment', 'delete,insert,update']);
  });

  it('two mappers of one name are refused (names are part of event ids), wherever they sit in the list', () => {
    const again = defineMapper({ ...drafts });
    for (const mappers of [[drafts, again], [drafts, lines, again], [lines, drafts, again]]) {
      expect(() => mapUnit(mappers, unit, context)).toThrow(/mapper "?drafts"?.*two mappers share this name/);
    }
    expect(mapUnit([drafts, lines], unit, context).events).toHaveLength(3);
  });

  it('numbers events across all mappers so a consumer can tell a complete transaction', () => {
    const { events } = mapUnit([drafts, lines], unit, context);
    expect(events.map((e) => [e.type, e.metadata['transaction.index'], e.metadata['transaction.count']])).toEqual([
      ['InvoiceDrafted', '0', '3'],
      ['LineAdded', '1', '3'],
      ['LineAdded', '2', '3'],
    ]);
    expect(new Set(events.map((e) => e.metadata['$correlationId'])).size).toBe(1);
  });

  it('does not let user metadata overwrite standard keys', () => {
    const { events } = mapUnit([drafts], unit, context);
    expect(events[0]!.metadata.mapper).toBe('drafts');
    expect(events[0]!.metadata['source.xid']).toBe('744');
    expect(events[0]!.metadata.tenant).toBe('acme');
    expect(STANDARD_METADATA_KEYS).toContain('transaction.count');
  });

  it('takes the entity from an explicit field when the stream is not <type>-<id>', () => {
    const { events } = mapUnit([lines], unit, context);
    expect(events[0]!.metadata['entity.type']).toBe('invoice');
    expect(events[0]!.metadata['entity.id']).toBe('inv_1');
    expect(events[0]!.metadata.contract).toBe('LineAdded@3');
  });

  it('does not call a mapper whose tables are absent from the unit', () => {
    let calls = 0;
    const counting = defineMapper({ name: 'payments', tables: { 'public.payment': { columns: ['id'] } }, map: () => (calls++, []) });
    expect(mapUnit([counting], unit, context).events).toEqual([]);
    expect(calls).toBe(0);
  });

  it('marks snapshot events with origin and generation', () => {
    const { events } = mapUnit([drafts, snapshotImport], snapshotRecord('public.invoice', { id: 'inv_1', status: 'paid' }, { generation: 'g2' }), context);
    expect(events).toHaveLength(1);
    const metadata = events[0]!.metadata;
    expect(metadata.origin).toBe('snapshot');
    expect(metadata['snapshot.generation']).toBe('g2');
    expect(metadata['source.operations']).toBe('read');
    expect(metadata['source.commitLsn']).toBeUndefined();
    expect(metadata['$correlationId']).toMatch(/^7000000000000000001:snapshot:g2:public\.invoice:[0-9a-f-]{36}$/);
  });

  it('rejects duplicate mapper names and an empty context', () => {
    expect(() => mapUnit([drafts, drafts], unit, context)).toThrow(/unique/);
    expect(() => mapUnit([drafts], unit, { assembler: '', sourceIdentity: 'x' })).toThrow(/assembler/);
  });
});

const snapshotImport = defineMapper({
  name: 'import',
  tables: { 'public.invoice': { columns: ['id', 'status'] } },
  map: (tx) => (tx.isSnapshot ? tx.rows('public.invoice').map((r) => ({ stream: `invoice-${String(r.id)}`, type: 'InvoiceImported', version: 1, data: { id: r.id } })) : []),
});

function failing(onError: 'halt' | 'park') {
  return defineMapper({
    name: `failing-${onError}`,
    onError,
    tables: { 'public.invoice': { columns: ['id', 'status'] } },
    map: (tx) => {
      for (const { after } of tx.inserts('public.invoice')) throw new Error(`cannot map invoice ${String(after.id)}`);
      return [];
    },
  });
}

describe('mapUnit: error policy', () => {
  it('halt: throws a MapperError naming mapper, position, tables, keys and cause', () => {
    let error: unknown;
    try {
      mapUnit([failing('halt'), lines], unit, context);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MapperError);
    expect(error).toBeInstanceOf(EventAssemblerError);
    const e = error as MapperError;
    expect(e.code).toBe('MAPPER_FAILED');
    expect(e.message).toContain('failing-halt');
    expect(e.message).toContain('0/16B3748');
    expect(e.message).toContain('xid 744');
    expect(e.message).toContain(unit.position.checkpoint);
    expect(e.message).toContain('public.invoice');
    expect(e.message).toContain('inv_1');
    expect(e.message).toContain('cannot map invoice inv_1');
    expect(e.details).toMatchObject({
      mapper: 'failing-halt',
      origin: 'change',
      position: { commitLsn: '0/16B3748', xid: 744, checkpoint: unit.position.checkpoint },
      tables: ['public.invoice'],
      keys: [{ table: 'public.invoice', op: 'insert', key: { id: 'inv_1' } }],
      cause: { name: 'Error', message: 'cannot map invoice inv_1' },
    });
    expect((e.cause as Error).message).toBe('cannot map invoice inv_1');
  });

  it('park: produces a MapperFailed record and the other mappers go on', () => {
    const { events, failed } = mapUnit([failing('park'), lines], unit, context);
    expect(events.map((e) => e.type)).toEqual(['LineAdded', 'LineAdded']);
    expect(events.map((e) => e.metadata['transaction.count'])).toEqual(['2', '2']);
    expect(failed).toHaveLength(1);
    const record = failed[0]!;
    expect(record.stream).toBe('event-assembler.failed-invoicing');
    expect(record.stream).toBe(failedRecordsStream('invoicing'));
    expect(record.type).toBe('MapperFailed');
    expect(record.id).toMatch(/^[0-9a-f-]{36}$/);
    expect((record.data as FailureDiagnosis).cause.message).toBe('cannot map invoice inv_1');
    expect(record.metadata['failure.type']).toBe('MapperFailed');
    expect(record.metadata['source.commitLsn']).toBe('0/16B3748');
    // Deterministic: the same failure replayed has the same id.
    expect(mapUnit([failing('park'), lines], unit, context).failed[0]!.id).toBe(record.id);
  });

  it('treats an invalid event as a mapper failure naming the field', () => {
    const bigints = defineMapper({
      name: 'bigints',
      tables: { 'public.invoice': { columns: ['id'] } },
      map: () => [{ stream: 'invoice-1', type: 'X', version: 1, data: { n: 1n } }],
    });
    expect(() => mapUnit([bigints], unit, context)).toThrow(/events\[0\]\.data\.n is a bigint/);
    const badStream = defineMapper({
      name: 'bad-stream',
      tables: { 'public.invoice': { columns: ['id'] } },
      map: () => [{ stream: 'invoices', type: 'X', version: 1, data: {} }],
    });
    expect(() => mapUnit([badStream], unit, context)).toThrow(/<entityType>-<entityId>/);
    const badVersion = defineMapper({
      name: 'bad-version',
      tables: { 'public.invoice': { columns: ['id'] } },
      map: () => [{ stream: 'invoice-1', type: 'X', version: 0, data: {} }],
    });
    expect(() => mapUnit([badVersion], unit, context)).toThrow(/positive integer/);
    const reserved = defineMapper({
      name: 'reserved',
      tables: { 'public.invoice': { columns: ['id'] } },
      map: () => [{ stream: 'invoice-1', type: 'X', version: 1, data: {}, metadata: { 'receipt.position': 'x' } }],
    });
    expect(() => mapUnit([reserved], unit, context)).toThrow(/reserved/);
    const receiptKey = defineMapper({
      name: 'receipt-key',
      tables: { 'public.invoice': { columns: ['id'] } },
      map: () => [{ stream: 'invoice-1', type: 'X', version: 1, data: {}, metadata: { receipt: 'x' } }],
    });
    expect(() => mapUnit([receiptKey], unit, context)).toThrow(/"receipt".*reserved/);
    const notArray = defineMapper({ name: 'not-array', tables: { 'public.invoice': { columns: ['id'] } }, map: () => undefined as never });
    expect(() => mapUnit([notArray], unit, context)).toThrow(/return \[\] for none/);
  });

  it('a failing snapshot record is diagnosed by generation and key', () => {
    const { failed } = mapUnit([failing('park')], snapshotRecord('public.invoice', { id: 'inv_1', status: 'x' }), context);
    expect(failed).toEqual([]); // the failing mapper reads inserts only: nothing to fail on
    const failingRead = defineMapper({
      name: 'failing-read',
      onError: 'park',
      tables: { 'public.invoice': { columns: ['id'] } },
      map: () => {
        throw new Error('nope');
      },
    });
    const record = mapUnit([failingRead], snapshotRecord('public.invoice', { id: 'inv_1' }, { generation: 'g3' }), context).failed[0]!;
    expect(record.data).toMatchObject({ origin: 'snapshot', snapshotGeneration: 'g3', position: null, keys: [{ table: 'public.invoice', op: 'read', key: { id: 'inv_1' } }] });
  });
});

describe('contractViolationRecord', () => {
  it('builds a deterministic ContractViolation record from an event', () => {
    const [event] = mapUnit([drafts], unit, context).events;
    const violations = [{ path: '/customerId', message: "must have required property 'customerId'" }];
    const record = contractViolationRecord(event!, violations);
    expect(record.stream).toBe('event-assembler.failed-invoicing');
    expect(record.type).toBe('ContractViolation');
    expect(record.id).toBe(contractViolationRecord(event!, violations).id);
    expect(record.id).not.toBe(event!.id);
    expect(record.data).toMatchObject({ event: { id: event!.id, contract: 'InvoiceDrafted@1', stream: 'invoice-inv_1' }, violations, mapper: 'drafts' });
    expect(record.metadata).toMatchObject({ 'failure.type': 'ContractViolation', 'failed.eventId': event!.id, 'source.commitLsn': '0/16B3748' });
    // In the place of its event: a consumer counting the transaction's events counts the record.
    expect(record.metadata).toMatchObject({ 'transaction.index': event!.metadata['transaction.index'], 'transaction.count': event!.metadata['transaction.count'], $correlationId: event!.metadata['$correlationId'] });
    expect(record.metadata.tenant).toBeUndefined();
  });
});

describe('update handling in mapUnit', () => {
  it('passes only declared before-image columns', () => {
    let seen: unknown;
    const spy = defineMapper({
      name: 'spy',
      tables: { 'public.invoice': { columns: ['id', 'status', 'total'], before: ['status'] } },
      map: (tx) => {
        seen = tx.updates('public.invoice')[0]!.before;
        return [];
      },
    });
    mapUnit([spy], transaction([update('public.invoice', { id: 'i', status: 'draft', total: '1.00', secret: 's' }, { id: 'i', status: 'issued', total: '2.00', secret: 's' })]), context);
    expect(seen).toEqual({ status: 'draft' });
  });
});
