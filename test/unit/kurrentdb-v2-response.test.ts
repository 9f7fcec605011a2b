// The in-memory server's AppendSession answer, encoded by hand (v2-append-response.ts): the same
// bytes google-protobuf writes for the same outputs and position.
import { describe, expect, it } from 'vitest';
import { v2StreamsPb } from '../../src/testing/kurrentdb/proto.js';
import { encodeAppendSessionResponse, type AppendOutput } from '../../src/testing/kurrentdb/v2-append-response.js';

function viaProtobuf(outputs: readonly AppendOutput[], position: bigint): Buffer {
  const response = new v2StreamsPb.AppendSessionResponse();
  for (const { streamName, revision } of outputs) {
    const output = new v2StreamsPb.AppendResponse();
    output.setStream(streamName);
    output.setStreamRevision(revision.toString());
    response.addOutput(output);
  }
  response.setPosition(position.toString());
  return Buffer.from(response.serializeBinary());
}

describe('encodeAppendSessionResponse', () => {
  const cases: [string, AppendOutput[], bigint][] = [
    ['one stream at revision 0, position 4096', [{ streamName: 'invoice-1', revision: 0n }], 4096n],
    ['several streams, revisions small and large', [{ streamName: 'a', revision: 1n }, { streamName: 'b-ü-日本', revision: 63n }, { streamName: 'c', revision: 64n }, { streamName: 'd', revision: 2n ** 53n + 3n }], 2n ** 40n],
    ['revision 2^63-1 and a position beyond 2^53', [{ streamName: 's', revision: 2n ** 63n - 1n }], 2n ** 60n + 7n],
    ['an empty stream name, position -1 (none)', [{ streamName: '', revision: 5n }], -1n],
    ['no outputs, position 0', [], 0n],
    ['a long stream name (two-byte lengths)', [{ streamName: 'x'.repeat(300), revision: 9n }], 123n],
    ['220 streams', Array.from({ length: 220 }, (_, i) => ({ streamName: `invoice-b${i}`, revision: BigInt(i % 3) })), 987_654_321n],
  ];
  for (const [name, outputs, position] of cases) {
    it(name, () => {
      expect(encodeAppendSessionResponse(outputs, position).equals(viaProtobuf(outputs, position))).toBe(true);
    });
  }
});
