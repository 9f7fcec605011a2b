// The in-memory KurrentDB's hand-made Streams.Read messages (read-codec.ts) against google-protobuf:
// the same bytes for every event shape, and plain stream reads' requests decoded as google-protobuf
// decodes them — everything else left to google-protobuf.
import { describe, expect, it } from 'vitest';
import { emptyPb, sharedPb, streamsPb } from '../../src/testing/kurrentdb/proto.js';
import { decodeStreamReadRequest, encodeLastStreamPosition, encodeReadEvent, encodeStreamNotFound, StreamReadRequest } from '../../src/testing/kurrentdb/read-codec.js';
import { lastStreamPosition, streamNotFound, toReadResp } from '../../src/testing/kurrentdb/read-messages.js';
import type { RecordedEvent } from '../../src/testing/kurrentdb/store.js';

const IDS = [
  'f3a1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b', // high bits set: negative halves
  '00000000-0000-0000-0000-000000000000', // both halves zero: not written
  '00000000-0000-0000-7fff-ffffffffffff',
  '12345678-9abc-4def-8123-456789abcdef',
];

function event(overrides: Partial<RecordedEvent>): RecordedEvent {
  return {
    streamName: 'invoice-42',
    id: IDS[0]!,
    type: 'InvoiceDrafted',
    contentType: 'application/json',
    data: Buffer.from('{"total":"60.00"}'),
    metadata: Buffer.from('{"source.commitLsn":"0/1A2B3C","$schema.name":"InvoiceDrafted"}'),
    revision: 7n,
    position: 123_456n,
    created: 17_330_000_000_000_000n,
    ...overrides,
  };
}

const CASES: [string, RecordedEvent][] = [
  ['a typical event', event({})],
  ['revision 0', event({ revision: 0n })],
  ['empty data and metadata', event({ data: new Uint8Array(), metadata: new Uint8Array() })],
  ['a large payload (multi-byte lengths)', event({ data: Buffer.alloc(300_000, 0x61), metadata: Buffer.alloc(200, 0x62) })],
  ['non-ASCII stream name and type', event({ streamName: 'kunde-Jürgen-日本', type: 'Überwiesen' })],
  ['an empty stream name and content type', event({ streamName: '', contentType: '' })],
  ['a tombstone (revision 2^63-1)', event({ revision: 2n ** 63n - 1n })],
  ['a position beyond 2^53', event({ position: 2n ** 60n + 5n })],
  ['position 0', event({ position: 0n })],
  ...IDS.map((id): [string, RecordedEvent] => [`id ${id}`, event({ id })]),
];

describe('read-codec: events as google-protobuf writes them', () => {
  for (const [name, recorded] of CASES) {
    for (const uuidAsString of [true, false]) {
      it(`${name}, ids as ${uuidAsString ? 'strings' : 'structured'}`, () => {
        const expected = Buffer.from(toReadResp(recorded, { uuidAsString }).serializeBinary());
        expect(encodeReadEvent(recorded, uuidAsString).equals(expected)).toBe(true);
      });
    }
  }

  it('StreamNotFound and last_stream_position', () => {
    for (const stream of ['invoice-1', '', 'ü'.repeat(100)]) {
      expect(encodeStreamNotFound(stream).equals(Buffer.from(streamNotFound(stream).serializeBinary()))).toBe(true);
    }
    for (const revision of [0n, 1n, 127n, 128n, 2n ** 53n + 1n, 2n ** 63n - 1n]) {
      expect(encodeLastStreamPosition(revision).equals(Buffer.from(lastStreamPosition(revision).serializeBinary()))).toBe(true);
    }
  });
});

type Configure = (options: streamsPb.ReadReq.Options, stream: streamsPb.ReadReq.Options.StreamOptions) => void;

function request(configure: Configure): Buffer {
  const stream = new streamsPb.ReadReq.Options.StreamOptions();
  stream.setStreamIdentifier(new sharedPb.StreamIdentifier().setStreamName(Buffer.from('order-7', 'utf8')));
  stream.setEnd(new emptyPb.Empty());
  const options = new streamsPb.ReadReq.Options();
  options.setStream(stream);
  options.setReadDirection(streamsPb.ReadReq.Options.ReadDirection.BACKWARDS);
  options.setCount('1');
  options.setNoFilter(new sharedPb.Empty());
  options.setUuidOption(new streamsPb.ReadReq.Options.UUIDOption().setString(new sharedPb.Empty()));
  configure(options, stream);
  return Buffer.from(new streamsPb.ReadReq().setOptions(options).serializeBinary());
}

describe('read-codec: plain stream reads decoded by hand', () => {
  it('a tail read (what the sink and the bridge send)', () => {
    expect(decodeStreamReadRequest(request(() => undefined))).toEqual(new StreamReadRequest('order-7', 'end', 'backwards', 1n, true, 0));
  });

  it('from a revision or the start, forwards, a large count, structured ids, compatibility 1', () => {
    const decoded = decodeStreamReadRequest(
      request((options, stream) => {
        stream.setRevision('9007199254740993');
        options.setReadDirection(streamsPb.ReadReq.Options.ReadDirection.FORWARDS);
        options.setCount('18446744073709551615');
        options.setUuidOption(new streamsPb.ReadReq.Options.UUIDOption().setStructured(new sharedPb.Empty()));
        options.setControlOption(new streamsPb.ReadReq.Options.ControlOption().setCompatibility(1));
        options.setResolveLinks(true);
      }),
    );
    expect(decoded).toEqual(new StreamReadRequest('order-7', 9007199254740993n, 'forwards', 18446744073709551615n, false, 1));
    expect(decodeStreamReadRequest(request((_, stream) => stream.setStart(new emptyPb.Empty())))?.from).toBe('start');
    expect(decodeStreamReadRequest(request((options) => options.clearUuidOption()))?.uuidAsString).toBe(true);
    expect(decodeStreamReadRequest(request((options) => options.setUuidOption(new streamsPb.ReadReq.Options.UUIDOption())))?.uuidAsString).toBe(false);
  });

  it('leaves subscriptions, $all reads, filters and reads without a count to google-protobuf', () => {
    const subscription = request((options) => options.setSubscription(new streamsPb.ReadReq.Options.SubscriptionOptions()));
    const all = request((options) => options.setAll(new streamsPb.ReadReq.Options.AllOptions().setEnd(new sharedPb.Empty())));
    const filter = request((options) => options.setFilter(new streamsPb.ReadReq.Options.FilterOptions()));
    const noCount = request((options) => options.clearCount());
    for (const bytes of [subscription, all, filter, noCount]) expect(decodeStreamReadRequest(bytes)).toBeNull();
    expect(decodeStreamReadRequest(Buffer.from([0x0a, 0x05, 0x0a]))).toBeNull(); // truncated
  });
});
