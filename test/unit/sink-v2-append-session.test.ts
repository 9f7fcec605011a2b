// The hand-written AppendSession bytes: the request body decodes with google-protobuf (the
// client's generated classes) to the same requests, and responses encoded by google-protobuf
// decode by hand to the same streams, revisions and position — at the edges of the varints.
import { describe, expect, it } from 'vitest';
import v2StreamsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/streams_pb.js';
import { decodeAppendSessionResponse, encodeAppendRequest, encodeAppendSessionBody, type EncodedStreamAppend } from '../../src/sink/v2-append-session.js';
import { encodeAppendRecordSized } from '../../src/sink/v2-append.js';

const record = (n: number) => encodeAppendRecordSized(`6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e${String(n).padStart(2, '0')}`, 'InvoiceIssued', JSON.stringify({ n }), { k: `v${n}` }).record;

/** The gRPC messages of a body: flag 0, 4-byte length, message. */
function messages(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let o = 0; o < body.length; ) {
    expect(body[o]).toBe(0);
    const length = body.readUInt32BE(o + 1);
    out.push(body.subarray(o + 5, o + 5 + length));
    o += 5 + length;
  }
  return out;
}

describe('AppendSession request body', () => {
  it('is each stream\'s AppendRequest as a gRPC message, in order, the same bytes as encoded one by one', () => {
    const requests: EncodedStreamAppend[] = [
      { streamName: 'invoice-1', expectedState: 'no_stream', records: [record(1)] },
      { streamName: 'invoice-ü日本', expectedState: 'any', records: [record(2), record(3)] },
      { streamName: 'invoice-3', expectedState: 'stream_exists', records: [record(4)] },
      { streamName: 'invoice-4', expectedState: 0n, records: [record(5)] },
      { streamName: 'invoice-5', expectedState: 2n ** 53n + 7n, records: [record(6)] },
      { streamName: 'invoice-6', expectedState: 2n ** 62n, records: [record(7)] },
      { streamName: 'x'.repeat(300), expectedState: 127n, records: [] },
    ];
    const decoded = messages(encodeAppendSessionBody(requests));
    expect(decoded).toHaveLength(requests.length);
    decoded.forEach((bytes, i) => {
      const r = requests[i]!;
      expect(bytes.equals(encodeAppendRequest(r.streamName, r.expectedState, r.records))).toBe(true);
      const request = v2StreamsPb.AppendRequest.deserializeBinary(bytes);
      expect(request.getStream()).toBe(r.streamName);
      const want = typeof r.expectedState === 'bigint' ? r.expectedState : { no_stream: -1n, any: -2n, stream_exists: -4n }[r.expectedState];
      expect(BigInt(request.getExpectedRevision()!)).toBe(want);
      expect(request.getRecordsList().map((x) => x.getRecordId())).toEqual(r.records.map((x) => v2StreamsPb.AppendRecord.deserializeBinary(x).getRecordId()));
    });
  });

  it('of no streams is empty', () => {
    expect(encodeAppendSessionBody([]).length).toBe(0);
  });
});

describe('AppendSessionResponse decoding', () => {
  const encode = (position: string, outputs: [string, string, string?][]) => {
    const response = new v2StreamsPb.AppendSessionResponse();
    response.setPosition(position);
    for (const [stream, revision, pos] of outputs) {
      const output = new v2StreamsPb.AppendResponse();
      output.setStream(stream);
      output.setStreamRevision(revision);
      if (pos !== undefined) output.setPosition(pos);
      response.addOutput(output);
    }
    return Buffer.from(response.serializeBinary());
  };

  it('reads what google-protobuf writes: streams, revisions and the position, small and large', () => {
    const outputs: [string, string, string?][] = [
      ['invoice-1', '0'],
      ['invoice-ü', '1', '99'],
      ['invoice-3', '127'],
      ['invoice-4', '128'],
      ['invoice-5', String(2 ** 53 + 1)],
      ['invoice-6', '9223372036854775807'],
      ['invoice-7', '-1'],
    ];
    for (const position of ['0', '4567', '9007199254740993', '9223372036854775807']) {
      const bytes = encode(position, outputs);
      const decoded = decodeAppendSessionResponse(bytes);
      expect(decoded.position).toBe(BigInt(position));
      expect(decoded.responses).toEqual(outputs.map(([streamName, revision]) => ({ streamName, revision: BigInt(revision) })));
    }
  });

  it('reads a message inside a larger buffer and refuses a truncated one', () => {
    const bytes = encode('42', [['s', '5']]);
    const padded = Buffer.concat([Buffer.from([9, 9, 9]), bytes, Buffer.from([7])]);
    expect(decodeAppendSessionResponse(padded, 3, 3 + bytes.length)).toEqual({ position: 42n, responses: [{ streamName: 's', revision: 5n }] });
    expect(() => decodeAppendSessionResponse(bytes, 0, bytes.length - 1)).toThrow(/truncated/);
  });
});
