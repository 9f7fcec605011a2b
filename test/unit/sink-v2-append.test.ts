// The hand-written multi-stream record encoding: decoded by google-protobuf (the client's own
// generated classes) to the same record, and its size equal to what a multi-stream append counts.
import { describe, expect, it } from 'vitest';
import v2StreamsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/streams_pb.js';
import { encodeAppendRecordSized, encodeAppendRequest } from '../../src/sink/v2-append.js';

/**
 * What a multi-stream append counts for a record, as KurrentDB states it: data + properties +
 * schema name (AppendRecordExtensions.CalculateSizeOnDisk), the properties stored as the event's
 * metadata JSON with `$schema.name` and `$schema.format` added.
 */
function multiStreamRecordSize(type: string, dataJson: string, metadata: Readonly<Record<string, string>>): number {
  const properties = JSON.stringify({ ...metadata, '$schema.name': type, '$schema.format': 'Json' });
  return Buffer.byteLength(dataJson, 'utf8') + Buffer.byteLength(properties, 'utf8') + Buffer.byteLength(type, 'utf8');
}

describe('v2 AppendRequest encoding', () => {
  const samples: Record<string, string>[] = [
    {},
    { a: 'b' },
    { 'source.commitLsn': '0/1A2B3C', contract: 'InvoiceIssued@2', 'receipt.ordinal': '0' },
    { 'quote"key': 'back\\slash', ctl: 'tab\there\u0001', 'ünï': 'cödé 日本 🙂', lone: 'x\ud800y', long: 'x'.repeat(300) },
    // Plain ASCII (the fast path) with lengths that need two-byte varints at every level.
    { 'source.commitLsn': '0/1A', long: 'y'.repeat(200), ['k'.repeat(130)]: 'v', huge: 'z'.repeat(20_000) },
  ];

  it('round-trips through the generated protobuf classes and counts the size a multi-stream append counts', () => {
    for (const [i, properties] of samples.entries()) {
      const type = i === 3 ? 'Tÿpe"1' : i === 4 ? 'T'.repeat(140) : 'InvoiceIssued';
      const data = Buffer.from(JSON.stringify({ n: i, text: 'ü'.repeat(i * 50) }), 'utf8');
      const id = `6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e7${i}`;
      const { record, size } = encodeAppendRecordSized(id, type, data, properties);
      expect(size).toBe(multiStreamRecordSize(type, data.toString('utf8'), properties));
      // Data given as its JSON text encodes to the same bytes.
      const fromText = encodeAppendRecordSized(id, type, data.toString('utf8'), properties);
      expect(fromText.size).toBe(size);
      expect(fromText.record.equals(record)).toBe(true);
      for (const expected of [5n, 'no_stream', 'any', 'stream_exists', 123456789012n] as const) {
        const bytes = encodeAppendRequest(`invoice-${i}`, expected, [record, record]);
        const request = v2StreamsPb.AppendRequest.deserializeBinary(bytes);
        expect(request.getStream()).toBe(`invoice-${i}`);
        const revision = BigInt(request.getExpectedRevision()!);
        expect(revision).toBe(typeof expected === 'bigint' ? expected : expected === 'no_stream' ? -1n : expected === 'any' ? -2n : -4n);
        const records = request.getRecordsList();
        expect(records).toHaveLength(2);
        const r = records[0]!;
        expect(r.getRecordId()).toBe(id);
        expect(r.getSchema()?.getName()).toBe(type);
        expect(r.getSchema()?.getFormat()).toBe(v2StreamsPb.SchemaFormat.SCHEMA_FORMAT_JSON);
        expect(Buffer.from(r.getData_asU8()).equals(data)).toBe(true);
        const props: Record<string, unknown> = {};
        r.getPropertiesMap().forEach((value, key) => (props[key] = value.getStringValue()));
        // As UTF-8 carries them (a lone surrogate becomes U+FFFD on any UTF-8 wire).
        const utf8 = (t: string) => Buffer.from(t, 'utf8').toString('utf8');
        expect(props).toEqual(Object.fromEntries(Object.entries(properties).map(([k, v]) => [utf8(k), utf8(v)])));
      }
    }
  });

  it('encodes a property the same when its value repeats (kept encoded) as when it changes', () => {
    const rounds = [
      { origin: 'change', mapper: 'm', 'source.xid': '1', long: 'L'.repeat(80) },
      { origin: 'change', mapper: 'm', 'source.xid': '2', long: 'L'.repeat(80) },
      { origin: 'change', mapper: 'n', 'source.xid': '2', long: 'L'.repeat(80) },
      { origin: 'change', mapper: 'n', 'source.xid': '2', long: 'M'.repeat(80) },
    ];
    for (const properties of rounds) {
      const { record } = encodeAppendRecordSized('6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e70', 'T', '{}', properties);
      const decoded = v2StreamsPb.AppendRequest.deserializeBinary(encodeAppendRequest('s', 'any', [record])).getRecordsList()[0]!;
      const map = decoded.getPropertiesMap();
      const got: Record<string, string> = {};
      for (const key of Object.keys(properties)) got[key] = map.get(key)!.getStringValue();
      expect(got).toEqual(properties);
      expect(map.getLength()).toBe(Object.keys(properties).length);
    }
  });

  it('encodes a key whose value changed with every record, then settles, as it encodes any other (compared again, kept encoded again)', () => {
    const decode = (record: Buffer) => {
      const map = v2StreamsPb.AppendRequest.deserializeBinary(encodeAppendRequest('s', 'any', [record])).getRecordsList()[0]!.getPropertiesMap();
      return { seq: map.get('t.seq')!.getStringValue(), other: map.get('t.other')!.getStringValue(), size: map.getLength() };
    };
    const sizes: number[] = [];
    // 1,000 records with a new value each (the key counts as changing: compared only now and then),
    // then 600 with one value (compared again at a re-check, then kept encoded), then new ones again.
    const values = [...Array.from({ length: 1000 }, (_, i) => `0/${(0x1a2b3c00 + i).toString(16)}`), ...Array.from({ length: 600 }, () => '0/SETTLED'), '0/1', '0/2'];
    for (const [i, seq] of values.entries()) {
      const properties = { 't.seq': seq, 't.other': `o${i % 3}` };
      const { record, size } = encodeAppendRecordSized('6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e70', 'T', '{}', properties);
      expect(decode(record)).toEqual({ seq, other: properties['t.other'], size: 2 });
      expect(size).toBe(multiStreamRecordSize('T', '{}', properties));
      sizes.push(record.length);
    }
    // The settled value's records are byte for byte alike, from the plain path and from the kept entry.
    const settled = values.flatMap((v, i) => (v === '0/SETTLED' && i % 3 === 0 ? [i] : []));
    const first = encodeAppendRecordSized('6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e70', 'T', '{}', { 't.seq': '0/SETTLED', 't.other': 'o0' }).record;
    for (const i of settled) expect(sizes[i]).toBe(first.length);
  });
});
