/**
 * Multi-stream append (KurrentDB 25.1+ `StreamsService.AppendSession`) with the records encoded
 * by hand.
 *
 * The client's `multiStreamAppend` builds every record with google-protobuf: one `Value` object
 * per metadata key, a map, a schema object, base64 data — about 0.4 ms per event with the ~25
 * metadata keys our events carry, most of it allocation and GC (measured: 1,000 such events in
 * one call ≈ 550 ms; without metadata ≈ 30 ms). Here each record is encoded once, straight into a
 * buffer, when the sink prepares the event, and a request is the concatenation of its records.
 * The call itself goes through the client's own gRPC client (its channel, credentials, deadline
 * and error conversion), so behaviour on the wire and in errors is the client's.
 *
 * Wire format (kurrentdb/protocols/v2/streams/streams.proto):
 *   AppendRequest  { string stream = 1; repeated AppendRecord records = 2; optional sint64 expected_revision = 3; }
 *   AppendRecord   { optional string record_id = 1; map<string, google.protobuf.Value> properties = 2;
 *                    SchemaInfo schema = 3; bytes data = 4; }
 *   SchemaInfo     { SchemaFormat format = 1; string name = 2; }
 *   Value          { string string_value = 3; … }
 * Expected revision: a revision ≥ 0, or -1 no stream, -2 any, -4 stream exists.
 */
import type { KurrentDBClient } from '@kurrent/kurrentdb-client';
import type * as grpc from '@grpc/grpc-js';
import commandErrors from '@kurrent/kurrentdb-client/dist/utils/CommandError.js';
import v2StreamsGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/streams_grpc_pb.js';
import v2StreamsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/streams_pb.js';
import { fieldSize, lenEnd, LEN, readVarint, skip, VARINT, writeVarint, type Cursor } from './protobuf-wire.js';
import { encodeAppendRequest, type EncodedStreamAppend, type MultiStreamAppendResult } from './v2-append-session.js';

export { encodeAppendRequest, type EncodedStreamAppend, type MultiStreamAppendResult, type WireExpectedState } from './v2-append-session.js';

const SCHEMA_FORMAT_JSON = 1;

/** Writes a length-delimited field: tag, length, then `write` fills `length` bytes. */
function lenField(buffer: Buffer, offset: number, field: number, length: number): number {
  buffer[offset++] = (field << 3) | LEN;
  return writeVarint(buffer, offset, length);
}


/**
 * One AppendRecord, encoded: JSON `data`, string `properties` (the event's metadata), the event
 * type as the schema name. The buffer is what goes into field 2 of an AppendRequest.
 */
/** Characters JSON.stringify writes as more than their UTF-8 bytes (escapes; lone surrogates). */
// eslint-disable-next-line no-control-regex -- control characters are exactly what JSON escapes
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** Bytes of `JSON.stringify(s)` given `s`'s UTF-8 byte length (the common case without escapes is computed, not serialized). */
function jsonStringBytes(s: string, utf8Bytes: number): number {
  return NEEDS_ESCAPE.test(s) ? Buffer.byteLength(JSON.stringify(s), 'utf8') : utf8Bytes + 2;
}

/**
 * The record, and the size a multi-stream append counts for it: data + properties as the JSON
 * object the server stores (with `$schema.name` and `$schema.format` added) + schema name —
 * (KurrentDB.Api.V2 AppendRecordExtensions.CalculateSizeOnDisk; the properties are stored as the
 * event's metadata JSON), computed from the byte lengths the encoding needs anyway instead of
 * serializing the properties once more.
 */
export function encodeAppendRecordSized(id: string, type: string, data: Buffer | string, properties: Readonly<Record<string, string>>): { record: Buffer; size: number } {
  return encodePlain(id, type, data, properties) ?? encodeGeneral(id, type, typeof data === 'string' ? Buffer.from(data, 'utf8') : data, properties);
}

/** Printable ASCII without `"` and `\\`: one byte per character in UTF-8, JSON-quoted as itself. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * Per plain property key: its encoded `key` field (tag 1, length, bytes), and the last value seen
 * with it — once a value comes twice in a row (`origin`, `mapper`, `contract`, … are the same for
 * most events), its whole map entry is kept encoded and copied as bytes.
 */
interface KeySlot {
  readonly field: Uint8Array;
  value: string | null;
  /** The whole entry for `value`, once it repeated. */
  entry: Uint8Array | null;
  /**
   * Values in a row that differed from the one before. A key whose value changes with every event
   * (`source.checkpoint`, `source.commitTime`, …) is not compared any more but every
   * {@link RECHECK_EVERY}th time: two distinct strings of one length built by concatenation are
   * compared character by character through V8's runtime (1.5–1.9 % of a streaming run's
   * samples in `perf`, 0.2 % after; bench/results/2026-12-07-sixth-session.md).
   */
  misses: number;
}

/** Misses in a row after which a key's values are taken as changing with every event. */
const VOLATILE_AFTER = 16;
/** A changing key's value is compared again this often (a power of two), in case it settled. */
const RECHECK_EVERY = 256;

/** Per property key: its slot, or null when the key is not plain. */
const plainKeys = new Map<string, KeySlot | null>();

function keySlot(key: string): KeySlot | null {
  let slot = plainKeys.get(key);
  if (slot === undefined) {
    if (PLAIN.test(key)) {
      const bytes = Buffer.allocUnsafe(fieldSize(key.length));
      const o = lenField(bytes, 0, 1, key.length);
      bytes.write(key, o, 'latin1');
      slot = { field: new Uint8Array(bytes), value: null, entry: null, misses: 0 };
    } else slot = null;
    if (plainKeys.size < 4096) plainKeys.set(key, slot);
  }
  return slot;
}

/** Values up to this length may be kept encoded with their key. */
const CACHED_VALUE_LENGTH = 64;

/** One map entry `{ key = 1; value = 2 { string_value = 3 } }`, encoded. */
function encodeEntry(field: Uint8Array, value: string): Uint8Array {
  const valueLength = fieldSize(value.length);
  const bytes = Buffer.allocUnsafe(fieldSize(field.length + fieldSize(valueLength)));
  let o = lenField(bytes, 0, 2, field.length + fieldSize(valueLength));
  bytes.set(field, o);
  o += field.length;
  o = lenField(bytes, o, 2, valueLength);
  o = lenField(bytes, o, 3, value.length);
  bytes.write(value, o, 'latin1');
  return new Uint8Array(bytes);
}

/**
 * Properties encoded the fast way (plain ASCII keys and values): the map entries in order — a
 * key field and its value, or a whole encoded entry and `null` — with the bytes they take on the
 * wire and as `"k":"v",` members of the metadata JSON the server stores. Made once for what
 * several records share (a unit's receipt keys), and per record for the rest; written straight
 * into the record's buffer.
 */
export interface PlainProperties {
  /** Key field, value, …; or a whole entry, `null`, … */
  readonly entries: readonly (Uint8Array | string | null)[];
  readonly bytes: number;
  readonly json: number;
}

/** Collects plain properties one by one (a caller that checks each property anyway adds it here). */
export class PlainPropertiesBuilder implements PlainProperties {
  readonly entries: (Uint8Array | string | null)[] = [];
  bytes = 0;
  json = 0;

  /** Adds one property; false (and nothing added) when key or value is not plain ASCII. */
  add(key: string, value: string): boolean {
    const slot = keySlot(key);
    if (slot === null) return false;
    const compare = slot.misses < VOLATILE_AFTER || (++slot.misses & (RECHECK_EVERY - 1)) === 0;
    if (compare && value === slot.value) {
      slot.misses = 0;
      // The same value as last time: checked then; its entry is encoded once, then copied.
      const entry = (slot.entry ??= encodeEntry(slot.field, value));
      this.bytes += entry.length;
      this.json += key.length + value.length + 6;
      this.entries.push(entry, null);
      return true;
    }
    if (!PLAIN.test(value)) return false;
    this.json += key.length + value.length + 6;
    // (Below VOLATILE_AFTER every value was compared: this one differed.)
    if (slot.value !== null && slot.misses < VOLATILE_AFTER) slot.misses += 1;
    if (value.length <= CACHED_VALUE_LENGTH) {
      slot.value = value;
      slot.entry = null;
    }
    this.bytes += fieldSize(slot.field.length + fieldSize(fieldSize(value.length)));
    this.entries.push(slot.field, value);
    return true;
  }
}

/** `properties` encoded the fast way, or null when a key or value is not plain ASCII (or not a string). */
export function plainProperties(properties: Readonly<Record<string, string>>): PlainProperties | null {
  const builder = new PlainPropertiesBuilder();
  for (const key in properties) {
    const value = properties[key]!;
    if (typeof value !== 'string' || !builder.add(key, value)) return null;
  }
  return builder;
}

/** One property the fast way (per event: the receipt's ordinal and count), or null when not plain. */
export function plainProperty(key: string, value: string): PlainProperties | null {
  const builder = new PlainPropertiesBuilder();
  return builder.add(key, value) ? builder : null;
}

/** Writes plain ASCII `text` at `o` (byte = char); returns the offset after it. */
function writeAscii(buffer: Buffer, o: number, text: string): number {
  const n = text.length;
  if (n > 64) return o + buffer.write(text, o, 'latin1');
  for (let i = 0; i < n; i++) buffer[o + i] = text.charCodeAt(i);
  return o + n;
}

function writeEntries(buffer: Buffer, o: number, entries: readonly (Uint8Array | string | null)[]): number {
  for (let i = 0; i < entries.length; i += 2) {
    const bytes = entries[i] as Uint8Array;
    const value = entries[i + 1] as string | null;
    // Bytes encoded before (a whole entry, or a key field) go in with `set` (a memmove): with a loop
    // of byte stores an event's record took 2,000 ns instead of 1,396 (bench/record-encoding.bench.ts).
    if (value === null) {
      buffer.set(bytes, o);
      o += bytes.length;
      continue;
    }
    const valueLength = fieldSize(value.length);
    o = lenField(buffer, o, 2, bytes.length + fieldSize(valueLength));
    buffer.set(bytes, o);
    o += bytes.length;
    o = lenField(buffer, o, 2, valueLength);
    o = lenField(buffer, o, 3, value.length);
    o = writeAscii(buffer, o, value);
  }
  return o;
}

/**
 * The common case, fast: when id, type and every property are plain ASCII, the record is written
 * straight into one buffer of its exact size (lengths are string lengths; only the data is
 * encoded as UTF-8). The properties come in parts, in order (the event's own, then shared ones).
 * Null when id or type is not plain (then the general encoder runs).
 */
export function encodePlainRecord(id: string, type: string, data: Buffer | string, parts: readonly PlainProperties[]): { record: Buffer; size: number } | null {
  if (!PLAIN.test(id) || !PLAIN.test(type)) return null;
  // `{` + `"$schema.name":<type>,"$schema.format":"Json"` + `}`, and per property `"k":"v",`.
  let json = 2 + 15 + type.length + 2 + 1 + 17 + 6;
  let size = fieldSize(id.length);
  for (const part of parts) {
    size += part.bytes;
    json += part.json;
  }
  const schemaLength = 2 + fieldSize(type.length);
  const dataLength = typeof data === 'string' ? Buffer.byteLength(data, 'utf8') : data.length;
  size += fieldSize(schemaLength) + fieldSize(dataLength);
  const buffer = Buffer.allocUnsafe(size);
  let o = lenField(buffer, 0, 1, id.length);
  o = writeAscii(buffer, o, id);
  for (const part of parts) o = writeEntries(buffer, o, part.entries);
  o = lenField(buffer, o, 3, schemaLength);
  buffer[o++] = (1 << 3) | VARINT;
  buffer[o++] = SCHEMA_FORMAT_JSON;
  o = lenField(buffer, o, 2, type.length);
  o = writeAscii(buffer, o, type);
  o = lenField(buffer, o, 4, dataLength);
  o += typeof data === 'string' ? buffer.write(data, o, 'utf8') : data.copy(buffer, o);
  if (o !== size) throw new Error(`encodePlainRecord: wrote ${o} of ${size} bytes`);
  return { record: buffer, size: dataLength + json + type.length };
}

function encodePlain(id: string, type: string, data: Buffer | string, properties: Readonly<Record<string, string>>): { record: Buffer; size: number } | null {
  const plain = plainProperties(properties);
  return plain && encodePlainRecord(id, type, data, [plain]);
}

function encodeGeneral(id: string, type: string, data: Buffer, properties: Readonly<Record<string, string>>): { record: Buffer; size: number } {
  const idLength = Buffer.byteLength(id, 'utf8');
  const typeLength = Buffer.byteLength(type, 'utf8');
  const entries: [number, number][] = [];
  let size = fieldSize(idLength);
  const keys = Object.keys(properties);
  // `{` + `"$schema.name":<type>,"$schema.format":"Json"` + `}`, and per property `"k":"v",`.
  let json = 2 + 15 + jsonStringBytes(type, typeLength) + 1 + 17 + 6;
  for (const key of keys) {
    const value = properties[key]!;
    const k = Buffer.byteLength(key, 'utf8');
    const v = Buffer.byteLength(value, 'utf8');
    entries.push([k, v]);
    size += fieldSize(fieldSize(k) + fieldSize(fieldSize(v)));
    json += jsonStringBytes(key, k) + 1 + jsonStringBytes(value, v) + 1;
  }
  const schemaLength = 2 + fieldSize(typeLength);
  size += fieldSize(schemaLength) + fieldSize(data.length);

  const buffer = Buffer.allocUnsafe(size);
  let o = lenField(buffer, 0, 1, idLength);
  o += buffer.write(id, o, 'utf8');
  keys.forEach((key, i) => {
    const [k, v] = entries[i]!;
    const value = fieldSize(v);
    o = lenField(buffer, o, 2, fieldSize(k) + fieldSize(value));
    o = lenField(buffer, o, 1, k);
    o += buffer.write(key, o, 'utf8');
    o = lenField(buffer, o, 2, value);
    o = lenField(buffer, o, 3, v);
    o += buffer.write(properties[key]!, o, 'utf8');
  });
  o = lenField(buffer, o, 3, schemaLength);
  buffer[o++] = (1 << 3) | VARINT;
  buffer[o++] = SCHEMA_FORMAT_JSON;
  o = lenField(buffer, o, 2, typeLength);
  o += buffer.write(type, o, 'utf8');
  o = lenField(buffer, o, 4, data.length);
  o += data.copy(buffer, o);
  if (o !== size) throw new Error(`encodeAppendRecordSized: wrote ${o} of ${size} bytes`);
  return { record: buffer, size: data.length + json + typeLength };
}

/** The length-delimited field whose tag was just read, as UTF-8 text. */
function readString(c: Cursor, end: number): string {
  const fieldEnd = lenEnd(c, end);
  const text = c.buf.toString('utf8', c.pos, fieldEnd);
  c.pos = fieldEnd;
  return text;
}

/**
 * An encoded AppendRecord's data (as JSON text) and properties (string values, in the order
 * they were written): what a compacted prepared event gives back when it is asked for its parts.
 */
export function readAppendRecord(record: Buffer): { dataJson: string; metadata: Record<string, string> } {
  let dataJson = '';
  const metadata: Record<string, string> = {};
  const c: Cursor = { buf: record, pos: 0 };
  while (c.pos < record.length) {
    const tag = readVarint(c);
    if (tag === ((4 << 3) | LEN)) {
      dataJson = readString(c, record.length);
    } else if (tag === ((2 << 3) | LEN)) {
      // A map entry: key = 1, value = 2 (a google.protobuf.Value: string_value = 3).
      const entryEnd = lenEnd(c, record.length);
      let key = '';
      let value = '';
      while (c.pos < entryEnd) {
        const field = readVarint(c);
        if (field === ((1 << 3) | LEN)) {
          key = readString(c, entryEnd);
        } else if (field === ((2 << 3) | LEN)) {
          const valueEnd = lenEnd(c, entryEnd);
          while (c.pos < valueEnd) {
            const inner = readVarint(c);
            if (inner === ((3 << 3) | LEN)) value = readString(c, valueEnd);
            else skip(c, inner & 7, valueEnd);
          }
        } else skip(c, field & 7, entryEnd);
      }
      metadata[key] = value;
    } else skip(c, tag & 7, record.length);
  }
  return { dataJson, metadata };
}

/** The parts of the client this relies on (present in @kurrent/kurrentdb-client 1.x, not in its typings). */
export interface ClientInternals {
  execute<T>(client: unknown, debugName: string, action: (grpcClient: grpc.Client) => Promise<T>): Promise<T>;
  callArguments(options: { requiresLeader: boolean }): [grpc.Metadata, grpc.CallOptions];
}

function internalsOf(client: KurrentDBClient): ClientInternals | null {
  const c = client as unknown as Partial<ClientInternals>;
  return typeof c.execute === 'function' && typeof c.callArguments === 'function' ? (c as ClientInternals) : null;
}

/** Whether `appendEncoded` can run on this client (else use the client's `multiStreamAppend`). */
export function supportsEncodedAppend(client: KurrentDBClient): boolean {
  return internalsOf(client) !== null && typeof commandErrors?.convertToCommandError === 'function';
}

const APPEND_SESSION = v2StreamsGrpc.StreamsServiceService.appendSession;

/**
 * Whether the client's cached server features list the v2 `AppendSession` (multi-stream append).
 * The client asks `ServerFeatures.GetSupportedMethods` once per connection and checks the same
 * list before its own `multiStreamAppend`; its `supports` is `protected` in the typings but a
 * public field at run time, so this reads the very answer the client will act on.
 */
export async function serverSupportsMultiStreamAppend(client: KurrentDBClient): Promise<boolean | 'unknown'> {
  const supports = (client as unknown as { supports?: (method: { path: string }) => Promise<boolean> }).supports;
  if (typeof supports !== 'function') return 'unknown';
  return supports(v2StreamsGrpc.StreamsServiceService.appendSession);
}

/**
 * One atomic multi-stream append of pre-encoded requests. Errors are the client's own
 * (`convertToCommandError`: `WrongExpectedVersionError`, `UnavailableError`, …).
 */
export function appendEncoded(client: KurrentDBClient, requests: readonly EncodedStreamAppend[]): Promise<MultiStreamAppendResult> {
  const internals = internalsOf(client);
  if (!internals) return Promise.reject(new Error('this KurrentDB client version does not expose the internals the encoded append needs'));
  return internals.execute(v2StreamsGrpc.StreamsServiceClient, 'multiStreamAppend', (grpcClient) =>
    new Promise<MultiStreamAppendResult>((resolve, reject) => {
      const [metadata, options] = internals.callArguments({ requiresLeader: false });
      const call = grpcClient.makeClientStreamRequest<Buffer, v2StreamsPb.AppendSessionResponse>(
        APPEND_SESSION.path,
        (message: Buffer) => message,
        (bytes: Buffer) => v2StreamsPb.AppendSessionResponse.deserializeBinary(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)),
        metadata,
        options,
        (error, response) => {
          if (error) return reject(commandErrors.convertToCommandError(error));
          if (!response) return reject(new Error('AppendSession answered without a response'));
          resolve({
            position: BigInt(response.getPosition()),
            responses: response.getOutputList().map((output) => ({ streamName: output.getStream(), revision: BigInt(output.getStreamRevision()) })),
          });
        },
      );
      call.on('error', () => undefined); // the callback above reports it
      void (async () => {
        for (const request of requests) {
          const ok = call.write(encodeAppendRequest(request.streamName, request.expectedState, request.records));
          if (!ok) await new Promise((r) => call.once('drain', r));
        }
        call.end();
      })();
    }),
  );
}
