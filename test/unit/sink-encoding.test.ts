// A prepared event's multi-stream record is encoded from parts (its own metadata, encoded while
// it is checked; the unit's receipt keys, once per unit; ordinal and count): it must be the very
// record — bytes and counted size — that encoding its whole merged metadata gives.
import { describe, expect, it } from 'vitest';
import { prepareEvent, unitReceiptPart } from '../../src/sink/encoding.js';
import { receiptAt, receiptToMetadata, type ReceiptScope, type ReceiptUnit } from '../../src/sink/receipt.js';
import { encodeAppendRecordSized } from '../../src/sink/v2-append.js';

const transaction: ReceiptUnit = { kind: 'transaction', assembler: 'billing', source: '7301234567890123456', commitLsn: '0/1A2B3C', xid: 812 };
const snapshot: ReceiptUnit = { kind: 'snapshot', assembler: 'billing', lsn: '0/16B3748', generation: '3', sequence: 41, table: 'public.invoice', key: '{"id":"ü-7"}' };

describe('prepared events', () => {
  const metadatas: Record<string, string>[] = [
    {},
    { 'source.commitLsn': '0/1A2B3C', contract: 'InvoiceIssued@2', $correlationId: 'abc', 'entity.id': 'inv-1' },
    { note: 'cödé 日本', plain: 'x' },
    { quote: 'say "hi"' },
    { long: 'v'.repeat(300), ['k'.repeat(130)]: 'w' },
  ];
  const places: [number, number, ReceiptScope][] = [[0, 1, 'stream'], [2, 3, 'stream'], [300, 301, 'stream'], [1_500, 2_000, 'unit']];
  for (const unit of [transaction, snapshot]) {
    for (const [m, metadata] of metadatas.entries()) {
      it(`${unit.kind} unit, metadata sample ${m}: the record and its size are those of the merged metadata`, () => {
        for (const [ordinal, count, scope] of places) {
          const event = { id: '6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e70', stream: 'invoice-1', type: 'InvoiceIssued', data: { n: 1, text: 'ü' }, metadata };
          for (const prepared of [prepareEvent(event, unit, ordinal, count, scope), prepareEvent(event, unitReceiptPart(unit), ordinal, count, scope)]) {
            const merged = { ...metadata, ...receiptToMetadata(receiptAt(unit, ordinal, count, scope)) };
            expect(prepared.metadata).toEqual(merged);
            expect(Object.keys(prepared.metadata)).toEqual(Object.keys(merged));
            expect(prepared.receipt).toEqual(receiptAt(unit, ordinal, count, scope));
            const whole = encodeAppendRecordSized(event.id, event.type, JSON.stringify(event.data), merged);
            expect(prepared.record.equals(whole.record)).toBe(true);
            expect(prepared.multiStreamSize).toBe(whole.size);
          }
        }
      });
    }
  }

  it('a compacted event gives back the same data, metadata, sizes, record and client event (read from its record)', () => {
    for (const unit of [transaction, snapshot]) {
      for (const metadata of metadatas) {
        for (const [ordinal, count, scope] of places) {
          const data = { n: 1, text: 'ü "quoted" 日本', nested: { list: [1, 2.5, null, 'x'] } };
          const event = { id: '6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e70', stream: 'invoice-1', type: 'InvoiceIssued', data, metadata };
          const whole = prepareEvent(event, unit, ordinal, count, scope);
          const compacted = prepareEvent(event, unit, ordinal, count, scope);
          compacted.compact();
          expect(compacted.record.equals(whole.record)).toBe(true);
          expect(compacted.multiStreamSize).toBe(whole.multiStreamSize);
          expect(compacted.dataJson).toBe(whole.dataJson);
          expect(compacted.data).toEqual(data);
          expect(compacted.metadata).toEqual(whole.metadata);
          expect(Object.keys(compacted.metadata)).toEqual(Object.keys(whole.metadata));
          expect(compacted.size).toBe(whole.size);
          expect(compacted.receipt).toEqual(whole.receipt);
          const a = compacted.eventData;
          const b = whole.eventData;
          expect({ ...a, id: a.id, type: a.type, data: a.data, metadata: a.metadata }).toEqual({ ...b, id: b.id, type: b.type, data: b.data, metadata: b.metadata });
        }
      }
    }
  });

  it('still rejects metadata that is not a string or uses the receipt keys', () => {
    const base = { id: '6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e70', stream: 's', type: 'T', data: {} };
    expect(() => prepareEvent({ ...base, metadata: { n: 1 as unknown as string } }, transaction, 0, 1)).toThrow(/metadata "n" that is not a string/);
    expect(() => prepareEvent({ ...base, metadata: { 'receipt.xid': '1' } }, transaction, 0, 1)).toThrow(/keys belong to the sink/);
    expect(() => prepareEvent({ ...base, metadata: { receipt: 'r1|t|a||0/1|1|0|1' } }, transaction, 0, 1)).toThrow(/keys belong to the sink/);
    expect(prepareEvent({ ...base, metadata: { receipts: 'mine' } }, transaction, 0, 1).metadata).toMatchObject({ receipts: 'mine' });
  });
});
