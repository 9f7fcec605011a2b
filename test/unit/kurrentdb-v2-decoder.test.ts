// The in-memory server's AppendSession decoding: a record's properties become the event's
// metadata JSON exactly as KurrentDB renders them (properties + `$schema.name` +
// `$schema.format`), whether the fast path copies them from the request bytes or they are decoded.
import { describe, expect, it } from 'vitest';
import { encodeAppendRecordSized, encodeAppendRequest } from '../../src/sink/v2-append.js';
import { decodeAppendRequest } from '../../src/testing/kurrentdb/v2-append-decoder.js';
import { metadataTail, toProposedEvent } from '../../src/testing/kurrentdb/streams-v2-service.js';

const ID = '6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e70';

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}
const field = (tag: number, body: Buffer): Buffer => Buffer.concat([Buffer.from([tag, ...varint(body.length)]), body]);

/** A record with the property entries exactly as given (repeated keys possible), schema JSON. */
function recordWithEntries(type: string, entries: readonly [string, string][]): Buffer {
  return Buffer.concat([
    field(0x0a, Buffer.from(ID)),
    ...entries.map(([k, v]) => field(0x12, Buffer.concat([field(0x0a, Buffer.from(k, 'utf8')), field(0x12, field(0x1a, Buffer.from(v, 'utf8')))]))),
    field(0x1a, Buffer.concat([Buffer.from([0x08, 1]), field(0x12, Buffer.from(type, 'utf8'))])),
    field(0x22, Buffer.from('{}')),
  ]);
}

function metadataOf(record: Buffer): { json: string; fast: boolean } {
  const request = decodeAppendRequest(encodeAppendRequest('s-1', 'any', [record]), metadataTail);
  const decoded = request.records[0]!;
  return { json: Buffer.from(toProposedEvent(decoded).event.metadata).toString('utf8'), fast: decoded.metadataJson !== null };
}

const rendered = (properties: Record<string, string>, type: string): string => JSON.stringify({ ...properties, '$schema.name': type, '$schema.format': 'Json' });

describe('in-memory server: record properties → event metadata', () => {
  const cases: { name: string; properties: Record<string, string>; fast: boolean }[] = [
    { name: 'none', properties: {}, fast: true },
    { name: 'plain ASCII, as the sink sends them', properties: { 'source.commitLsn': '0/1A2B3C', $correlationId: 'abc', contract: 'InvoiceIssued@2', 'receipt.ordinal': '0', empty: '' }, fast: true },
    { name: 'long values and keys (two-byte varints)', properties: { long: 'y'.repeat(200), ['k'.repeat(130)]: 'v', huge: 'z'.repeat(20_000) }, fast: true },
    { name: 'a quote', properties: { a: 'say "hi"' }, fast: false },
    { name: 'a backslash', properties: { a: 'c:\\x' }, fast: false },
    { name: 'a control character', properties: { a: 'tab\there' }, fast: false },
    { name: 'non-ASCII', properties: { ü: 'cödé 日本 🙂' }, fast: false },
    { name: 'DEL', properties: { a: 'x\u007fy' }, fast: false },
    { name: 'an integer-like key (sorted first by JSON.stringify)', properties: { b: '1', 7: 'seven', a: '2' }, fast: false },
    { name: 'the server’s own $schema.name', properties: { '$schema.name': 'Mine', a: 'b' }, fast: false },
    { name: 'the server’s own $schema.format', properties: { '$schema.format': 'Bytes' }, fast: false },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.fast ? 'copied' : 'decoded'}, and the same JSON as JSON.stringify`, () => {
      const { record } = encodeAppendRecordSized(ID, 'InvoiceIssued', '{}', c.properties);
      const { json, fast } = metadataOf(record);
      expect(fast).toBe(c.fast);
      const expected = Object.prototype.hasOwnProperty.call(c.properties, '$schema.name') || Object.prototype.hasOwnProperty.call(c.properties, '$schema.format')
        ? JSON.stringify(Object.assign({ ...c.properties }, { '$schema.name': 'InvoiceIssued', '$schema.format': 'Json' }))
        : rendered(c.properties, 'InvoiceIssued');
      expect(json).toBe(expected);
      expect(JSON.parse(json)).toEqual({ ...c.properties, '$schema.name': 'InvoiceIssued', '$schema.format': 'Json' });
    });
  }

  it('a repeated key takes the decoded path: the last value wins, in the first one’s place (a protobuf map)', () => {
    const { json, fast } = metadataOf(recordWithEntries('T', [['a', '1'], ['b', '2'], ['a', '3']]));
    expect(fast).toBe(false);
    expect(json).toBe('{"a":"3","b":"2","$schema.name":"T","$schema.format":"Json"}');
  });

  it('without a metadata tail every record is decoded, to the same JSON', () => {
    const { record } = encodeAppendRecordSized(ID, 'InvoiceIssued', '{}', { a: '1', b: '2' });
    const decoded = decodeAppendRequest(encodeAppendRequest('s-1', 'any', [record])).records[0]!;
    expect(decoded.metadataJson).toBeNull();
    expect(Buffer.from(toProposedEvent(decoded).event.metadata).toString('utf8')).toBe(rendered({ a: '1', b: '2' }, 'InvoiceIssued'));
  });

  it('many records in one request, plain and not, each get their own metadata', () => {
    const sets = Array.from({ length: 40 }, (_, i) => (i % 3 === 0 ? { n: String(i), q: `"${i}"` } : { n: String(i), ['k'.repeat(i + 1)]: 'v'.repeat(i * 50) }));
    const records = sets.map((p) => encodeAppendRecordSized(ID, 'T', '{}', p).record);
    const request = decodeAppendRequest(encodeAppendRequest('s-1', 'any', records), metadataTail);
    expect(request.records.map((r) => Buffer.from(toProposedEvent(r).event.metadata).toString('utf8'))).toEqual(sets.map((p) => rendered(p, 'T')));
    expect(request.records.map((r) => r.metadataJson !== null)).toEqual(sets.map((_, i) => i % 3 !== 0));
  });

  it('an event type that needs escaping is escaped in $schema.name on the fast path too', () => {
    const { json, fast } = metadataOf(recordWithEntries('Ty"pe', [['a', '1']]));
    expect(fast).toBe(true);
    expect(json).toBe(JSON.stringify({ a: '1', '$schema.name': 'Ty"pe', '$schema.format': 'Json' }));
  });
});
