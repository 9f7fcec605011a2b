/**
 * A stream's tail read (`Streams.Read` backwards from the end, one event) with the request encoded
 * and the response decoded by hand: the request is a few constant bytes around the stream name,
 * and of the response only the last event's id, revision, type and custom metadata are needed —
 * google-protobuf would build every message object (and the map, the data) to get them.
 *
 * Wire format (kurrentdb/protocols/v1/streams.proto, shared.proto):
 *   ReadReq        { Options options = 1; }
 *   Options        { StreamOptions stream = 1; ReadDirection read_direction = 3; bool resolve_links = 4;
 *                    uint64 count = 5; Empty no_filter = 8; UUIDOption uuid_option = 9; … }
 *   StreamOptions  { StreamIdentifier stream_identifier = 1; Empty end = 4; … }
 *   StreamIdentifier { bytes stream_name = 3; }
 *   UUIDOption     { Empty structured = 1; Empty string = 2; }
 *   ReadResp       { ReadEvent event = 1; StreamNotFound stream_not_found = 4; (others: skipped) }
 *   ReadEvent      { RecordedEvent event = 1; RecordedEvent link = 2; … }
 *   RecordedEvent  { UUID id = 1; StreamIdentifier stream_identifier = 2; uint64 stream_revision = 3;
 *                    uint64 prepare_position = 4; uint64 commit_position = 5;
 *                    map<string, string> metadata = 6 (`type`, `content-type`, `created`);
 *                    bytes custom_metadata = 7; bytes data = 8; }
 *   UUID           { Structured structured = 1 { int64 most_significant_bits = 1; int64 least_significant_bits = 2; };
 *                    string string = 2; }
 */
import { fieldSize, lenEnd, LEN, readVarint, skip, writeVarint, type Cursor } from './protobuf-wire.js';

/** What a tail read found: the stream's last event, or that it has none. */
export type TailRead =
  | {
      readonly kind: 'event';
      readonly revision: bigint;
      readonly id: string;
      readonly type: string;
      /**
       * The event's custom metadata as the client's `readStream` gives it: parsed JSON, the raw
       * bytes (a Buffer) when they are not JSON, `undefined` when there are none.
       */
      readonly metadata: unknown;
    }
  /**
   * No readable event: the server said `stream_not_found` (a missing or soft-deleted stream), or
   * the read ended without an event (every event before the stream's `$tb` or beyond `$maxCount`)
   * — where the client's `readStream` throws `StreamNotFoundError` or yields nothing.
   */
  | { readonly kind: 'not-found' };

/** After StreamOptions in Options: read_direction = Backwards, count = 1, no_filter {}, uuid_option { string {} }. */
const OPTIONS_TAIL = Buffer.from([(3 << 3) | 0, 1, (5 << 3) | 0, 1, (8 << 3) | LEN, 0, (9 << 3) | LEN, 2, (2 << 3) | LEN, 0]);
/** After StreamIdentifier in StreamOptions: end {}. */
const STREAM_OPTIONS_TAIL = Buffer.from([(4 << 3) | LEN, 0]);

/**
 * The gRPC frame (5-byte header + ReadReq) of a read of `stream` backwards from its end, one
 * event, links not resolved, ids as strings — what the client's bridge asks for a tail read.
 */
export function encodeTailReadRequest(stream: string): Buffer {
  const name = Buffer.byteLength(stream, 'utf8');
  const identifier = fieldSize(name);
  const streamOptions = fieldSize(identifier) + STREAM_OPTIONS_TAIL.length;
  const options = fieldSize(streamOptions) + OPTIONS_TAIL.length;
  const request = fieldSize(options);
  const buffer = Buffer.allocUnsafe(5 + request);
  buffer[0] = 0;
  buffer.writeUInt32BE(request, 1);
  let o = 5;
  buffer[o++] = (1 << 3) | LEN; // ReadReq.options
  o = writeVarint(buffer, o, options);
  buffer[o++] = (1 << 3) | LEN; // Options.stream
  o = writeVarint(buffer, o, streamOptions);
  buffer[o++] = (1 << 3) | LEN; // StreamOptions.stream_identifier
  o = writeVarint(buffer, o, identifier);
  buffer[o++] = (3 << 3) | LEN; // StreamIdentifier.stream_name
  o = writeVarint(buffer, o, name);
  o += buffer.write(stream, o, 'utf8');
  o += STREAM_OPTIONS_TAIL.copy(buffer, o);
  o += OPTIONS_TAIL.copy(buffer, o);
  if (o !== buffer.length) throw new Error(`encodeTailReadRequest: wrote ${o} of ${buffer.length} bytes`);
  return buffer;
}

/** A uint64/int64 varint as a bigint (two's complement 64-bit for int64 when `signed`). */
function readVarint64(c: Cursor, signed: boolean): bigint {
  let result = 0n;
  let shift = 0n;
  for (let i = 0; i < 10; i++) {
    const b = c.buf[c.pos++];
    if (b === undefined) throw new Error('truncated varint');
    result |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return signed ? BigInt.asIntN(64, result) : BigInt.asUintN(64, result);
    shift += 7n;
  }
  throw new Error('varint longer than 10 bytes');
}


/** UUID: the string form, or the structured form (two int64 halves) as the client's `parseUUID` writes it. */
function readUuid(c: Cursor, end: number): string {
  let text: string | undefined;
  let most = 0n;
  let least = 0n;
  let structured = false;
  while (c.pos < end) {
    const tag = readVarint(c);
    if (tag === ((2 << 3) | LEN)) {
      const fieldEnd = lenEnd(c, end);
      text = c.buf.toString('utf8', c.pos, fieldEnd);
      structured = false;
      c.pos = fieldEnd;
    } else if (tag === ((1 << 3) | LEN)) {
      const fieldEnd = lenEnd(c, end);
      structured = true;
      most = least = 0n;
      while (c.pos < fieldEnd) {
        const inner = readVarint(c);
        if (inner === ((1 << 3) | 0)) most = readVarint64(c, false);
        else if (inner === ((2 << 3) | 0)) least = readVarint64(c, false);
        else skip(c, inner & 7, fieldEnd);
      }
    } else skip(c, tag & 7, end);
  }
  if (structured) {
    const ms = most.toString(16).padStart(16, '0');
    const ls = least.toString(16).padStart(16, '0');
    return `${ms.slice(0, 8)}-${ms.slice(8, 12)}-${ms.slice(12)}-${ls.slice(0, 4)}-${ls.slice(4)}`;
  }
  return text ?? '';
}

/** The client's `parseMetadata`: none → undefined; JSON → parsed; otherwise the bytes. */
function parseCustomMetadata(buf: Buffer, start: number, end: number): unknown {
  if (start === end) return undefined;
  try {
    return JSON.parse(buf.toString('utf8', start, end));
  } catch {
    return Buffer.from(buf.subarray(start, end)); // a copy, a Buffer as from the client's bridge
  }
}

/** RecordedEvent → the parts a tail read needs. */
function readRecordedEvent(c: Cursor, end: number): TailRead {
  let id = '';
  let revision = 0n;
  let type = '<no-event-type-provided>'; // the client's default when the server sends none
  let metadataStart = 0;
  let metadataEnd = 0;
  while (c.pos < end) {
    const tag = readVarint(c);
    switch (tag) {
      case (1 << 3) | LEN: {
        const fieldEnd = lenEnd(c, end);
        id = readUuid(c, fieldEnd);
        break;
      }
      case (3 << 3) | 0:
        revision = readVarint64(c, false);
        break;
      case (6 << 3) | LEN: {
        // One map entry { string key = 1; string value = 2; }: only `type` is wanted.
        const fieldEnd = lenEnd(c, end);
        let key = '';
        let value = '';
        while (c.pos < fieldEnd) {
          const inner = readVarint(c);
          if (inner === ((1 << 3) | LEN) || inner === ((2 << 3) | LEN)) {
            const innerEnd = lenEnd(c, fieldEnd);
            const text = c.buf.toString('utf8', c.pos, innerEnd);
            if (inner === ((1 << 3) | LEN)) key = text;
            else value = text;
            c.pos = innerEnd;
          } else skip(c, inner & 7, fieldEnd);
        }
        if (key === 'type') type = value;
        break;
      }
      case (7 << 3) | LEN:
        metadataEnd = lenEnd(c, end);
        metadataStart = c.pos;
        c.pos = metadataEnd;
        break;
      default:
        skip(c, tag & 7, end);
    }
  }
  return { kind: 'event', revision, id, type, metadata: parseCustomMetadata(c.buf, metadataStart, metadataEnd) };
}

/**
 * One ReadResp message in `buf[start, end)`: the event it carries, `not-found`, or null for the
 * messages a read may also send (first/last stream position, checkpoints, …).
 */
export function decodeTailReadResponse(buf: Buffer, start: number, end: number): TailRead | null {
  const c: Cursor = { buf, pos: start };
  let found: TailRead | null = null;
  while (c.pos < end) {
    const tag = readVarint(c);
    if (tag === ((1 << 3) | LEN)) {
      // ReadEvent: its `event` (field 1); a resolved link (field 2) is not asked for.
      const eventEnd = lenEnd(c, end);
      while (c.pos < eventEnd) {
        const inner = readVarint(c);
        if (inner === ((1 << 3) | LEN)) {
          const recordedEnd = lenEnd(c, eventEnd);
          found = readRecordedEvent(c, recordedEnd);
          c.pos = recordedEnd;
        } else skip(c, inner & 7, eventEnd);
      }
    } else if (tag === ((4 << 3) | LEN)) {
      c.pos = lenEnd(c, end);
      found = { kind: 'not-found' };
    } else skip(c, tag & 7, end);
  }
  return found;
}
