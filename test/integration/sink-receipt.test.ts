// Receipts: their order (one function), their metadata form, snapshot records next to
// transactions in one stream, and a server whose max append size is smaller than configured.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import {
  compareGenerations,
  compareReceipts,
  createKurrentDBSink,
  flatReceiptMetadata,
  isReceiptKey,
  OversizedEventError,
  parseReceipt,
  receiptAt,
  receiptFromMetadata,
  receiptToMetadata,
  receiptsComparable,
  type KurrentDBSink,
  type KurrentDBSinkOptions,
  type Receipt,
  type SinkBatch,
  type SnapshotUnit,
  type TransactionUnit,
} from '../../src/sink/index.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { useInMemoryKurrentDB } from '../support/kurrentdb-rig.js';

const { cleanups, server } = useInMemoryKurrentDB();

async function sink(db: InMemoryKurrentDB, options: Partial<KurrentDBSinkOptions> & { assembler: string }): Promise<KurrentDBSink> {
  const created = await createKurrentDBSink({ connectionString: db.connectionString, retry: { initialDelayMs: 5, maxDelayMs: 50 }, ...options });
  cleanups.push(() => created.close());
  return created;
}

const transaction = (commitLsn: string, xid: number, assembler = 'asm'): TransactionUnit => ({ kind: 'transaction', assembler, source: '1', commitLsn, xid });
const snapshot = (lsn: string, sequence: number, generation = 'g1'): SnapshotUnit => ({
  kind: 'snapshot',
  assembler: 'asm',
  source: '1',
  lsn,
  generation,
  sequence,
  table: 'public.invoice',
  key: `{"id":${sequence}}`,
});

describe('receipt order', () => {
  it('orders transactions by commit LSN as numbers, then xid, then ordinal', () => {
    const ordered: Receipt[] = [
      receiptAt(transaction('0/9', 5), 0, 2),
      receiptAt(transaction('0/9', 5), 1, 2),
      receiptAt(transaction('0/10', 3), 0, 1), // 0/10 > 0/9 although "0/10" < "0/9" as text
      receiptAt(transaction('1/0', 1), 0, 1),
    ];
    for (let i = 0; i < ordered.length; i++) {
      for (let j = 0; j < ordered.length; j++) {
        expect(Math.sign(compareReceipts(ordered[i]!, ordered[j]!))).toBe(Math.sign(i - j));
      }
    }
  });

  it('puts a snapshot record before transactions committed at or after its LSN, and orders records by generation and sequence', () => {
    const ordered: Receipt[] = [
      receiptAt(transaction('0/50', 1), 0, 1),
      receiptAt(snapshot('0/100', 0), 0, 1),
      receiptAt(snapshot('0/100', 1), 0, 2),
      receiptAt(snapshot('0/100', 1), 1, 2),
      receiptAt(snapshot('0/100', 0, 'g2'), 0, 1),
      receiptAt(transaction('0/100', 2), 0, 1),
      receiptAt(transaction('0/180', 3), 0, 1),
      receiptAt(snapshot('0/200', 7), 0, 1), // an incremental chunk at its high watermark
      receiptAt(transaction('0/250', 4), 0, 1),
    ];
    for (let i = 0; i < ordered.length; i++) {
      for (let j = 0; j < ordered.length; j++) {
        expect(Math.sign(compareReceipts(ordered[i]!, ordered[j]!))).toBe(Math.sign(i - j));
      }
    }
  });

  it('orders generations as they were made: 9 before 10, a name before its .1 extension', () => {
    const order = ['1', '2', '9', '10', '11', '100', 'rebuild', 'rebuild.1', 'rebuild.2', 'rebuild.10'];
    for (let i = 0; i < order.length; i++) {
      for (let j = 0; j < order.length; j++) expect(Math.sign(compareGenerations(order[i]!, order[j]!))).toBe(Math.sign(i - j));
    }
    expect(compareReceipts(receiptAt(snapshot('0/100', 5, '9'), 0, 1), receiptAt(snapshot('0/100', 0, '10'), 0, 1))).toBeLessThan(0);
  });

  it('does not compare receipts of different assemblers or source systems', () => {
    expect(receiptsComparable(transaction('0/1', 1, 'a'), transaction('0/1', 1, 'b'))).toBe(false);
    expect(receiptsComparable(transaction('0/1', 1), { ...transaction('0/1', 1), source: '2' })).toBe(false);
    expect(() => compareReceipts(receiptAt(transaction('0/1', 1, 'a'), 0, 1), receiptAt(transaction('0/1', 1, 'b'), 0, 1))).toThrow(RangeError);
  });

  // Free text with everything the format must survive: its separator, its escape, JSON quotes, a backslash, a control character, beyond ASCII.
  const awkward: SnapshotUnit = { ...snapshot('0/100', 3, 'g|%7C.1'), assembler: 'a|b%c', source: 'sys|1', table: 'public."a|b"', key: '{"id":"x|%25\\\n","n":"é😀"}' };
  const receipts: Receipt[] = [
    receiptAt(transaction('16/B374D848', 4_000_000_000), 3, 4),
    receiptAt(snapshot('0/100', 12), 0, 1),
    receiptAt(transaction('0/1', 1), 70_000, 120_000, 'unit'),
    receiptAt(snapshot('0/100', 12), 5, 9, 'unit'),
    receiptAt({ kind: 'transaction', assembler: 'asm', commitLsn: '0/2', xid: 7 }, 0, 1), // source unknown
    receiptAt(awkward, 1, 2),
  ];

  it('is one plain-ASCII property, and round-trips whatever the names and keys hold, ignoring foreign keys', () => {
    for (const receipt of receipts) {
      const metadata = receiptToMetadata(receipt);
      expect(Object.keys(metadata)).toEqual(['receipt']);
      expect(metadata['receipt']).toMatch(/^r1\|[ts]\|[\x20\x21\x23-\x5b\x5d-\x7e]*$/); // no `"`, no `\`: the fast encoding's "plain"
      expect(receiptFromMetadata({ ...metadata, '$schema.name': 'X', other: 'y' })).toEqual(receipt);
      expect(parseReceipt(metadata['receipt']!)).toEqual(receipt);
    }
    expect(receiptToMetadata(receiptAt(transaction('0/1A2B', 77), 1, 2))).toEqual({ receipt: 'r1|t|asm|1|0/1A2B|77|1|2' });
    expect(receiptToMetadata(receiptAt(snapshot('0/500', 1), 0, 1, 'unit'))).toEqual({ receipt: 'r1|s|asm|1|0/500|g1|1|public.invoice|{%22id%22:1}|0|1|u' });
  });

  it('reads the flat receipt.* keys earlier versions wrote into the same receipt', () => {
    for (const receipt of receipts) {
      const flat = flatReceiptMetadata(receipt);
      expect(Object.keys(flat).every((key) => key.startsWith('receipt.'))).toBe(true);
      expect(receiptFromMetadata({ ...flat, '$schema.name': 'X', other: 'y' })).toEqual(receipt);
    }
    expect(flatReceiptMetadata(receiptAt(transaction('0/1A2B', 77), 1, 2))).toEqual({
      'receipt.assembler': 'asm',
      'receipt.kind': 'transaction',
      'receipt.source': '1',
      'receipt.commitLsn': '0/1A2B',
      'receipt.xid': '77',
      'receipt.ordinal': '1',
      'receipt.count': '2',
    });
  });

  it('rejects malformed receipts in either form', () => {
    expect(receiptFromMetadata(undefined)).toBeNull();
    expect(receiptFromMetadata({})).toBeNull();
    expect(receiptFromMetadata(new Uint8Array([1, 2]))).toBeNull();
    expect(receiptFromMetadata({ ...flatReceiptMetadata(receiptAt(transaction('0/1', 1), 0, 1)), 'receipt.commitLsn': 'nope' })).toBeNull();
    for (const value of [
      'r2|t|asm|1|0/1|1|0|1', // another version
      'r1|x|asm|1|0/1|1|0|1',
      'r1|t|asm|1|0/1|1|0', // a field short
      'r1|t|asm|1|0/1|1|0|1|v', // a trailing field that is not the scope
      'r1|t|asm|1|0/1|1|0|1|u|u',
      'r1|t|asm|1|nope|1|0|1',
      'r1|t|asm|1|0/1|-1|0|1',
      'r1|t|a%zz|1|0/1|1|0|1', // a broken escape
      'r1|s|asm|1|0/1|g1|1|public.invoice|0|1', // a snapshot record a field short
      'r1|s|asm|1|0/1|g1|x|public.invoice|k|0|1',
    ]) expect(receiptFromMetadata({ receipt: value }), value).toBeNull();
    // A `receipt` that is not a string is not a receipt, even next to flat keys.
    expect(receiptFromMetadata({ receipt: 1, ...flatReceiptMetadata(receiptAt(transaction('0/1', 1), 0, 1)) })).toBeNull();
    expect(receiptFromMetadata({ receipt: 'r1|t|asm|1|0/1|1|0|1', 'receipt.kind': 'snapshot' })).toMatchObject({ kind: 'transaction' }); // the one property wins
  });

  it('reserves the key `receipt` and the keys starting with `receipt.`', () => {
    expect(['receipt', 'receipt.ordinal', 'receipt.anything'].every(isReceiptKey)).toBe(true);
    expect(['receipts', 'receiptx', 'Receipt', 'a.receipt', 'source.commitLsn'].some(isReceiptKey)).toBe(false);
  });
});

describe('snapshot records and transactions in one stream', () => {
  it('skips replayed snapshot records and transactions, and appends what follows', async () => {
    const db = await server();
    const id = randomUUID().slice(0, 8);
    const stream = `invoice-${id}-1`;
    const assembler = `asm_${id}`;
    const record = (sequence: number): SinkBatch => ({
      position: { kind: 'snapshot', snapshotGeneration: 'g1', lsn: '0/500', sequence, table: 'public.invoice', key: `{"id":${sequence}}`, systemId: '1' },
      events: [{ id: uuidv5(`${id}/snap/${sequence}`), stream, type: 'InvoiceSnapshotted', data: { sequence }, metadata: { 'snapshot.generation': 'g1' } }],
    });
    const change = (commitLsn: string, xid: number): SinkBatch => ({
      position: { checkpoint: `cp-${commitLsn}`, commitLsn, xid, systemId: '1' },
      events: [{ id: uuidv5(`${id}/tx/${commitLsn}`), stream, type: 'InvoiceChanged', data: { xid }, metadata: {} }],
    });

    const s1 = await sink(db, { assembler });
    await s1.append(record(0));
    await s1.append(record(1));
    await s1.append(change('0/600', 10));
    await s1.close();

    const s2 = await sink(db, { assembler });
    expect(await s2.append(record(0))).toMatchObject({ appended: 0, skipped: 1, checkpoint: 'skipped' });
    expect(await s2.append(record(1))).toMatchObject({ appended: 0, skipped: 1 });
    expect(await s2.append(change('0/600', 10))).toMatchObject({ appended: 0, skipped: 1 });
    expect(await s2.append(record(2))).toMatchObject({ appended: 0, skipped: 1 }); // before 0/600: already covered by order
    expect(await s2.append(change('0/700', 11))).toMatchObject({ appended: 1, skipped: 0 });

    const stored = db.readStreamEvents(stream).map((event) => receiptFromMetadata(JSON.parse(Buffer.from(event.metadata).toString('utf8'))));
    expect(stored.map((receipt) => receipt?.kind)).toEqual(['snapshot', 'snapshot', 'transaction', 'transaction']);
    expect(stored[1]).toMatchObject({ generation: 'g1', sequence: 1, table: 'public.invoice', key: '{"id":1}', lsn: '0/500' });
  });
});

describe.each([
  { mode: 'multi-stream' as const, features: { multiStreamAppend: true } },
  { mode: 'per-stream' as const, features: { multiStreamAppend: false } },
])('a server with a smaller max append size than configured ($mode)', ({ mode, features }) => {
  it('learns the server\'s limit from its answer, splits, and still appends each event once in order', async () => {
    const db = await server({ features, maxAppendSize: 2_500 });
    const id = randomUUID().slice(0, 8);
    const stream = `invoice-${id}-1`;
    const warnings: string[] = [];
    const s = await sink(db, { assembler: `asm_${id}`, logger: { info() {}, warn: (message) => void warnings.push(message) } });
    expect(s.mode).toBe(mode);
    const batch: SinkBatch = {
      position: { checkpoint: 'cp', commitLsn: '0/900', xid: 42 },
      events: Array.from({ length: 6 }, (_, i) => ({ id: uuidv5(`${id}/${i}`), stream, type: 'InvoiceLineAdded', data: { i, text: 'q'.repeat(700) }, metadata: {} })),
    };
    expect(await s.append(batch)).toMatchObject({ appended: 6, skipped: 0, checkpoint: 'appended' });
    expect(db.readStreamEvents(stream).map((event) => event.id)).toEqual(batch.events.map((event) => event.id));
    expect(warnings.some((w) => w.includes('max append size is smaller than configured'))).toBe(true);

    // A single event over the server's limit is an error naming it, never dropped.
    const huge: SinkBatch = {
      position: { checkpoint: 'cp2', commitLsn: '0/A00', xid: 43 },
      events: [{ id: uuidv5(`${id}/huge`), stream, type: 'InvoiceLineAdded', data: { text: 'q'.repeat(3_000) }, metadata: {} }],
    };
    const error = (await s.append(huge).catch((e: unknown) => e)) as OversizedEventError;
    expect(error).toBeInstanceOf(OversizedEventError);
    expect(error.details).toMatchObject({ stream, type: 'InvoiceLineAdded', limit: 2_500 });
    expect(db.readStreamEvents(stream)).toHaveLength(6);
  });
});
