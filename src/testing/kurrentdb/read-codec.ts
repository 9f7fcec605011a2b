// Streams.Read messages encoded and decoded by hand, for the hot paths: every event a read or a
// subscription sends (ReadResp.event), a stream read's StreamNotFound and last_stream_position, and
// the request of a plain stream read (no subscription, no filter). google-protobuf built a dozen
// objects per event sent (and per request received) and serialized them field by field: most of
// the in-memory server's CPU per tail read and per delivered event. The bytes are those
// google-protobuf writes (test/unit/kurrentdb-read-codec.test.ts compares them); everything else
// (confirmations, checkpoints, $all reads' requests, subscriptions' requests) stays google-protobuf.
//
// Wire format (kurrentdb/protocols/v1/streams.proto, shared.proto):
//   ReadResp       { ReadEvent event = 1; StreamNotFound stream_not_found = 4; uint64 last_stream_position = 6; … }
//   ReadEvent      { RecordedEvent event = 1; uint64 commit_position = 3; … }
//   RecordedEvent  { UUID id = 1; StreamIdentifier stream_identifier = 2; uint64 stream_revision = 3;
//                    uint64 prepare_position = 4; uint64 commit_position = 5; map<string, string> metadata = 6;
//                    bytes custom_metadata = 7; bytes data = 8; }
//   UUID           { Structured structured = 1 { int64 most_significant_bits = 1; int64 least_significant_bits = 2; }; string string = 2; }
//   StreamNotFound { StreamIdentifier stream_identifier = 1; }   StreamIdentifier { bytes stream_name = 3; }
//   ReadReq        { Options options = 1; }
//   Options        { StreamOptions stream = 1; AllOptions all = 2; ReadDirection read_direction = 3; bool resolve_links = 4;
//                    uint64 count = 5; SubscriptionOptions subscription = 6; FilterOptions filter = 7; Empty no_filter = 8;
//                    UUIDOption uuid_option = 9; ControlOption control_option = 10; }
//   StreamOptions  { StreamIdentifier stream_identifier = 1; uint64 revision = 2; Empty start = 3; Empty end = 4; }
//   UUIDOption     { Empty structured = 1; Empty string = 2; }   ControlOption { uint32 compatibility = 1; }
import type { RecordedEvent } from './store-types.js';

const LEN = 2;

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size += 1;
  }
  return size;
}

function writeVarint(buffer: Buffer, offset: number, n: number): number {
  while (n >= 0x80) {
    buffer[offset++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  buffer[offset++] = n;
  return offset;
}

/** Bytes of a uint64 (or an int64 as two's complement) varint. */
function bigVarintSize(n: bigint): number {
  let v = BigInt.asUintN(64, n);
  let size = 1;
  while (v >= 0x80n) {
    v >>= 7n;
    size += 1;
  }
  return size;
}

function writeBigVarint(buffer: Buffer, offset: number, n: bigint): number {
  if (n >= 0n && n < 0x1fffffffffffffn) return writeVarint(buffer, offset, Number(n));
  let v = BigInt.asUintN(64, n);
  while (v >= 0x80n) {
    buffer[offset++] = Number(v & 0x7fn) | 0x80;
    v >>= 7n;
  }
  buffer[offset++] = Number(v);
  return offset;
}

const fieldSize = (length: number): number => 1 + varintSize(length) + length;

/** The event id as UUID.Structured's two signed halves. */
function structuredUuid(id: string): [bigint, bigint] {
  const hex = id.replace(/-/g, '');
  return [BigInt.asIntN(64, BigInt(`0x${hex.slice(0, 16)}`)), BigInt.asIntN(64, BigInt(`0x${hex.slice(16)}`))];
}

/**
 * The metadata map's entries as google-protobuf writes them (keys sorted: `content-type`,
 * `created`, `type`), each `{ string key = 1; string value = 2 }`.
 */
const MAP_KEYS = ['content-type', 'created', 'type'].map((key) => Buffer.from(key, 'latin1'));

/**
 * Where encoded messages are made: 64 KiB arenas, each message a view. They are short-lived
 * (copied into the answer's frames, then dropped); Buffer.allocUnsafe's 8 KiB pool held five
 * events and allocating a new one took more CPU than encoding them.
 */
const ARENA_SIZE = 64 * 1024;
let arena = Buffer.alloc(0);
let arenaUsed = 0;

function allocate(size: number): Buffer {
  if (size > ARENA_SIZE / 4) return Buffer.allocUnsafeSlow(size);
  if (arenaUsed + size > arena.length) {
    arena = Buffer.allocUnsafeSlow(ARENA_SIZE);
    arenaUsed = 0;
  }
  const view = arena.subarray(arenaUsed, arenaUsed + size);
  arenaUsed += size;
  return view;
}

/** ReadResp { event { event { … }, commit_position } }: ResponseConverter.ConvertToReadEvent. */
export function encodeReadEvent(event: RecordedEvent, uuidAsString: boolean): Buffer {
  const streamNameLength = Buffer.byteLength(event.streamName, 'utf8');
  const values = [event.contentType, event.created.toString(), event.type];
  const valueLengths = values.map((v) => Buffer.byteLength(v, 'utf8'));
  const idLength = uuidAsString ? Buffer.byteLength(event.id, 'utf8') : 0;
  let uuidSize: number;
  let structured: [bigint, bigint] | null = null;
  if (uuidAsString) uuidSize = fieldSize(idLength);
  else {
    structured = structuredUuid(event.id);
    // UUID.structured = 1 { most_significant_bits = 1; least_significant_bits = 2 } (zeros not written)
    uuidSize = fieldSize((structured[0] !== 0n ? 1 + bigVarintSize(structured[0]) : 0) + (structured[1] !== 0n ? 1 + bigVarintSize(structured[1]) : 0));
  }
  const position = event.position;
  const positionSize = position !== 0n ? 1 + bigVarintSize(position) : 0;
  let recorded = fieldSize(uuidSize) + (streamNameLength > 0 ? fieldSize(fieldSize(streamNameLength)) : fieldSize(0));
  if (event.revision !== 0n) recorded += 1 + bigVarintSize(event.revision);
  recorded += 2 * positionSize;
  for (let i = 0; i < 3; i++) recorded += fieldSize(fieldSize(MAP_KEYS[i]!.length) + fieldSize(valueLengths[i]!));
  if (event.metadata.length > 0) recorded += fieldSize(event.metadata.length);
  if (event.data.length > 0) recorded += fieldSize(event.data.length);
  const readEvent = fieldSize(recorded) + 1 + bigVarintSize(position);
  const total = fieldSize(readEvent);

  const b = allocate(total);
  let o = 0;
  b[o++] = (1 << 3) | LEN; // ReadResp.event
  o = writeVarint(b, o, readEvent);
  b[o++] = (1 << 3) | LEN; // ReadEvent.event
  o = writeVarint(b, o, recorded);
  b[o++] = (1 << 3) | LEN; // RecordedEvent.id
  o = writeVarint(b, o, uuidSize);
  if (structured === null) {
    b[o++] = (2 << 3) | LEN; // UUID.string
    o = writeVarint(b, o, idLength);
    o += b.write(event.id, o, 'utf8');
  } else {
    b[o++] = (1 << 3) | LEN; // UUID.structured
    o = writeVarint(b, o, uuidSize - 2); // a Structured is at most 22 bytes: one length byte
    if (structured[0] !== 0n) {
      b[o++] = 1 << 3;
      o = writeBigVarint(b, o, structured[0]);
    }
    if (structured[1] !== 0n) {
      b[o++] = 2 << 3;
      o = writeBigVarint(b, o, structured[1]);
    }
  }
  b[o++] = (2 << 3) | LEN; // RecordedEvent.stream_identifier
  if (streamNameLength > 0) {
    o = writeVarint(b, o, fieldSize(streamNameLength));
    b[o++] = (3 << 3) | LEN; // StreamIdentifier.stream_name
    o = writeVarint(b, o, streamNameLength);
    o += b.write(event.streamName, o, 'utf8');
  } else b[o++] = 0;
  if (event.revision !== 0n) {
    b[o++] = 3 << 3;
    o = writeBigVarint(b, o, event.revision);
  }
  if (position !== 0n) {
    b[o++] = 4 << 3; // prepare_position
    o = writeBigVarint(b, o, position);
    b[o++] = 5 << 3; // commit_position
    o = writeBigVarint(b, o, position);
  }
  for (let i = 0; i < 3; i++) {
    const key = MAP_KEYS[i]!;
    b[o++] = (6 << 3) | LEN;
    o = writeVarint(b, o, fieldSize(key.length) + fieldSize(valueLengths[i]!));
    b[o++] = (1 << 3) | LEN;
    o = writeVarint(b, o, key.length);
    o += key.copy(b, o);
    b[o++] = (2 << 3) | LEN;
    o = writeVarint(b, o, valueLengths[i]!);
    o += b.write(values[i]!, o, 'utf8');
  }
  if (event.metadata.length > 0) {
    b[o++] = (7 << 3) | LEN;
    o = writeVarint(b, o, event.metadata.length);
    b.set(event.metadata, o);
    o += event.metadata.length;
  }
  if (event.data.length > 0) {
    b[o++] = (8 << 3) | LEN;
    o = writeVarint(b, o, event.data.length);
    b.set(event.data, o);
    o += event.data.length;
  }
  b[o++] = 3 << 3; // ReadEvent.commit_position (set even when 0: a oneof member)
  o = writeBigVarint(b, o, position);
  if (o !== total) throw new Error(`encodeReadEvent: wrote ${o} of ${total} bytes`);
  return b;
}

/** ReadResp { stream_not_found { stream_identifier { stream_name } } }. */
export function encodeStreamNotFound(streamName: string): Buffer {
  const length = Buffer.byteLength(streamName, 'utf8');
  const identifier = length > 0 ? fieldSize(length) : 0;
  const notFound = fieldSize(identifier);
  const b = Buffer.allocUnsafe(fieldSize(notFound));
  let o = 0;
  b[o++] = (4 << 3) | LEN;
  o = writeVarint(b, o, notFound);
  b[o++] = (1 << 3) | LEN;
  o = writeVarint(b, o, identifier);
  if (length > 0) {
    b[o++] = (3 << 3) | LEN;
    o = writeVarint(b, o, length);
    b.write(streamName, o, 'utf8');
  }
  return b;
}

/** ReadResp { last_stream_position } (written even when 0: a oneof member). */
export function encodeLastStreamPosition(revision: bigint): Buffer {
  const b = Buffer.allocUnsafe(1 + bigVarintSize(revision));
  b[0] = 6 << 3;
  writeBigVarint(b, 1, revision);
  return b;
}

/** A plain stream read (Streams.Read on a stream, a count, no filter), decoded by hand. */
export class StreamReadRequest {
  constructor(
    readonly streamName: string,
    readonly from: 'start' | 'end' | bigint,
    readonly direction: 'forwards' | 'backwards',
    readonly count: bigint,
    readonly uuidAsString: boolean,
    /** ControlOption.compatibility (the Rust client inside @kurrent/bridge sends 1). */
    readonly compatibility: number,
  ) {}
}

/** A cursor over `bytes`; `fail` marks anything this decoder leaves to google-protobuf. */
class Cursor {
  fail = false;
  constructor(
    readonly bytes: Uint8Array,
    public offset: number,
    readonly end: number,
  ) {}

  get done(): boolean {
    return this.fail || this.offset >= this.end;
  }

  varint(): number {
    let result = 0;
    let scale = 1;
    for (;;) {
      if (this.offset >= this.end || scale > 2 ** 49) {
        this.fail = true;
        return 0;
      }
      const b = this.bytes[this.offset++]!;
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 128;
    }
  }

  bigVarint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.offset >= this.end || shift > 63n) {
        this.fail = true;
        return 0n;
      }
      const b = this.bytes[this.offset++]!;
      result |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return BigInt.asUintN(64, result);
      shift += 7n;
    }
  }

  /** A length-delimited field's contents, as a cursor. */
  sub(): Cursor {
    const length = this.varint();
    const start = this.offset;
    this.offset += length;
    if (this.offset > this.end) this.fail = true;
    return new Cursor(this.bytes, start, Math.min(this.offset, this.end));
  }
}

/** StreamOptions: the stream name and where to read from; null when not a shape handled here. */
function decodeStreamOptions(c: Cursor): { streamName: string; from: 'start' | 'end' | bigint } | null {
  let streamName = '';
  let from: 'start' | 'end' | bigint = 'start'; // no revision option: google-protobuf's case is NOT_SET, read as start
  let identifiers = 0;
  while (!c.done) {
    const tag = c.varint();
    if (tag === ((1 << 3) | LEN)) {
      const identifier = c.sub();
      if (++identifiers > 1) return null; // repeated messages merge: google-protobuf's business
      while (!identifier.done) {
        const t = identifier.varint();
        if (t !== ((3 << 3) | LEN)) return null;
        const name = identifier.sub();
        if (name.fail) return null;
        streamName = Buffer.from(name.bytes.buffer, name.bytes.byteOffset + name.offset, name.end - name.offset).toString('utf8');
      }
      if (identifier.fail) return null;
    } else if (tag === 2 << 3) from = c.bigVarint();
    else if (tag === ((3 << 3) | LEN) || tag === ((4 << 3) | LEN)) {
      if (!c.sub().done) return null; // Empty with content: leave it to google-protobuf
      from = tag === ((3 << 3) | LEN) ? 'start' : 'end';
    } else return null;
  }
  return c.fail ? null : { streamName, from };
}

/**
 * The ReadReq of a plain stream read, or null for anything else (a $all read, a subscription, a
 * filter, a field this decoder does not know): the caller decodes those with google-protobuf.
 */
export function decodeStreamReadRequest(bytes: Uint8Array): StreamReadRequest | null {
  const top = new Cursor(bytes, 0, bytes.length);
  if (top.varint() !== ((1 << 3) | LEN)) return null;
  const c = top.sub();
  if (!top.done) return null; // ReadReq has one field, sent once
  let stream: { streamName: string; from: 'start' | 'end' | bigint } | null = null;
  let direction: 'forwards' | 'backwards' = 'forwards';
  let count = 0n;
  let uuidAsString = true;
  let compatibility = 0;
  const seen = new Set<number>();
  while (!c.done) {
    const tag = c.varint();
    const field = Math.floor(tag / 8);
    if (seen.has(field)) return null;
    seen.add(field);
    if (tag === ((1 << 3) | LEN)) stream = decodeStreamOptions(c.sub());
    else if (tag === 3 << 3) {
      const value = c.varint();
      if (value > 1) return null;
      direction = value === 1 ? 'backwards' : 'forwards';
    } else if (tag === 4 << 3) c.varint(); // resolve_links: links are not served
    else if (tag === 5 << 3) count = c.bigVarint();
    else if (tag === ((8 << 3) | LEN)) {
      if (!c.sub().done) return null;
    } else if (tag === ((9 << 3) | LEN)) {
      const option = c.sub();
      uuidAsString = false; // an option without `string` asks for structured ids
      while (!option.done) {
        const t = option.varint();
        if (t !== ((1 << 3) | LEN) && t !== ((2 << 3) | LEN)) return null;
        if (!option.sub().done) return null;
        uuidAsString = t === ((2 << 3) | LEN);
      }
      if (option.fail) return null;
    } else if (tag === ((10 << 3) | LEN)) {
      const control = c.sub();
      while (!control.done) {
        if (control.varint() !== 1 << 3) return null;
        compatibility = control.varint();
      }
      if (control.fail) return null;
    } else return null;
    if (stream === null && field === 1) return null;
  }
  if (c.fail || stream === null || !seen.has(5)) return null;
  return new StreamReadRequest(stream.streamName, stream.from, direction, count, uuidAsString, compatibility);
}
