/**
 * The bytes of one multi-stream append call (`StreamsService.AppendSession`), both ways, by hand:
 * the request body — every stream's AppendRequest as a gRPC message, written straight into one
 * buffer — and the AppendSessionResponse.
 *
 * Before, each stream's request was encoded into a buffer of its own, copied into a gRPC frame,
 * and the frames concatenated (three copies of every record and two allocations per stream), and
 * the response went through google-protobuf (an object per stream, its revision as a string, then
 * a BigInt). A call carries a few hundred streams; both ends were ≈ 2 µs per stream of CPU.
 *
 * Wire format (kurrentdb/protocols/v2/streams/streams.proto):
 *   AppendRequest          { string stream = 1; repeated AppendRecord records = 2; optional sint64 expected_revision = 3; }
 *   AppendSessionResponse  { repeated AppendResponse output = 1; sint64 position = 2; }
 *   AppendResponse         { string stream = 1; sint64 stream_revision = 2; optional sint64 position = 3; }
 * Expected revision: a revision ≥ 0, or -1 no stream, -2 any, -4 stream exists.
 */
import { fieldSize, LEN, VARINT, varintSize, writeVarint } from './protobuf-wire.js';

export type WireExpectedState = bigint | 'no_stream' | 'any' | 'stream_exists';

export interface EncodedStreamAppend {
  readonly streamName: string;
  readonly expectedState: WireExpectedState;
  readonly records: readonly Buffer[];
}

export interface MultiStreamAppendResult {
  readonly position: bigint;
  readonly responses: readonly { readonly streamName: string; readonly revision: bigint }[];
}

function expectedRevision(state: WireExpectedState): bigint {
  if (typeof state === 'bigint') return state;
  return state === 'no_stream' ? -1n : state === 'any' ? -2n : -4n;
}

/** The zigzag encoding of a sint64 (as a varint's value). */
function zigzag(n: bigint): bigint {
  return n >= 0n ? n << 1n : (-n << 1n) - 1n;
}

/** Bytes of a varint of a value that may exceed 2^53. */
function bigVarintSize(n: bigint): number {
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? varintSize(Number(n)) : Math.ceil(n.toString(2).length / 7);
}

function writeBigVarint(buffer: Buffer, o: number, n: bigint): number {
  if (n <= BigInt(Number.MAX_SAFE_INTEGER)) return writeVarint(buffer, o, Number(n));
  for (;;) {
    const low = Number(n & 0x7fn);
    n >>= 7n;
    if (n === 0n) {
      buffer[o++] = low;
      return o;
    }
    buffer[o++] = low | 0x80;
  }
}

function lenField(buffer: Buffer, o: number, field: number, length: number): number {
  buffer[o++] = (field << 3) | LEN;
  return writeVarint(buffer, o, length);
}

/** One stream's AppendRequest: its size, and a writer of its bytes. */
function requestSize(request: EncodedStreamAppend, revision: bigint): number {
  let size = fieldSize(Buffer.byteLength(request.streamName, 'utf8')) + 1 + bigVarintSize(revision);
  for (const record of request.records) size += fieldSize(record.length);
  return size;
}

function writeRequest(buffer: Buffer, o: number, request: EncodedStreamAppend, revision: bigint): number {
  const stream = request.streamName;
  o = lenField(buffer, o, 1, Buffer.byteLength(stream, 'utf8'));
  o += buffer.write(stream, o, 'utf8');
  for (const record of request.records) {
    o = lenField(buffer, o, 2, record.length);
    o += record.copy(buffer, o);
  }
  buffer[o++] = (3 << 3) | VARINT;
  return writeBigVarint(buffer, o, revision);
}

/** AppendRequest for one stream: its name, its expected revision, its encoded records. */
export function encodeAppendRequest(stream: string, expected: WireExpectedState, records: readonly Buffer[]): Buffer {
  const request = { streamName: stream, expectedState: expected, records };
  const revision = zigzag(expectedRevision(expected));
  const size = requestSize(request, revision);
  const buffer = Buffer.allocUnsafe(size);
  const o = writeRequest(buffer, 0, request, revision);
  if (o !== size) throw new Error(`encodeAppendRequest: wrote ${o} of ${size} bytes`);
  return buffer;
}

/** The request body of one AppendSession call: each stream's AppendRequest as a gRPC message (flag 0, 4-byte length), in one buffer. */
export function encodeAppendSessionBody(requests: readonly EncodedStreamAppend[]): Buffer {
  const revisions = requests.map((r) => zigzag(expectedRevision(r.expectedState)));
  const sizes = requests.map((r, i) => requestSize(r, revisions[i]!));
  let total = 0;
  for (const size of sizes) total += 5 + size;
  const buffer = Buffer.allocUnsafe(total);
  let o = 0;
  for (let i = 0; i < requests.length; i++) {
    const size = sizes[i]!;
    buffer[o] = 0;
    buffer.writeUInt32BE(size, o + 1);
    const end = writeRequest(buffer, o + 5, requests[i]!, revisions[i]!);
    if (end !== o + 5 + size) throw new Error(`encodeAppendSessionBody: wrote ${end - o - 5} of ${size} bytes for ${requests[i]!.streamName}`);
    o = end;
  }
  return buffer;
}

/** A protobuf reader over `bytes[start, end)`: just what AppendSessionResponse needs. */
class Reader {
  constructor(
    private readonly bytes: Buffer,
    public o: number,
    private readonly end: number,
  ) {}

  get done(): boolean {
    return this.o >= this.end;
  }

  /** A varint below 2^49 as a number (tags, lengths, most revisions); -1 when it is longer (read it with `bigVarint`). */
  varint(): number {
    const start = this.o;
    let value = 0;
    for (let shift = 0; shift < 49; shift += 7) {
      const b = this.byte();
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
    this.o = start;
    return -1;
  }

  bigVarint(): bigint {
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      const b = this.byte();
      value |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return value;
    }
    throw new Error('varint longer than 10 bytes');
  }

  /** A varint known to be small (tags, lengths). */
  small(): number {
    const v = this.varint();
    if (v < 0 || v > 0x7fffffff) throw new Error('length or tag out of range');
    return v;
  }

  sint64(): bigint {
    const z = this.varint();
    if (z >= 0) return BigInt(z % 2 === 1 ? -(z + 1) / 2 : z / 2);
    const big = this.bigVarint();
    return big & 1n ? -((big + 1n) >> 1n) : big >> 1n;
  }

  /** The bounds of a length-delimited field's content. */
  slice(): [number, number] {
    const length = this.small();
    const start = this.o;
    this.o += length;
    if (this.o > this.end) throw new Error('truncated length-delimited field');
    return [start, this.o];
  }

  skip(wireType: number): void {
    if (wireType === VARINT) this.bigVarint();
    else if (wireType === LEN) this.slice();
    else if (wireType === 1) this.o += 8;
    else if (wireType === 5) this.o += 4;
    else throw new Error(`unsupported wire type ${wireType}`);
    if (this.o > this.end) throw new Error('truncated field');
  }

  private byte(): number {
    if (this.o >= this.end) throw new Error('truncated varint');
    return this.bytes[this.o++]!;
  }
}

function decodeAppendResponse(bytes: Buffer, start: number, end: number): { streamName: string; revision: bigint } {
  const r = new Reader(bytes, start, end);
  let streamName = '';
  let revision = 0n;
  while (!r.done) {
    const tag = r.small();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === LEN) {
      const [s, e] = r.slice();
      streamName = bytes.toString('utf8', s, e);
    } else if (field === 2 && (tag & 7) === VARINT) revision = r.sint64();
    else r.skip(tag & 7);
  }
  return { streamName, revision };
}

/** Decodes one AppendSessionResponse message (`bytes[start, end)`). Throws on malformed input. */
export function decodeAppendSessionResponse(bytes: Buffer, start = 0, end = bytes.length): MultiStreamAppendResult {
  const r = new Reader(bytes, start, end);
  const responses: { streamName: string; revision: bigint }[] = [];
  let position = 0n;
  while (!r.done) {
    const tag = r.small();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === LEN) {
      const [s, e] = r.slice();
      responses.push(decodeAppendResponse(bytes, s, e));
    } else if (field === 2 && (tag & 7) === VARINT) position = r.sint64();
    else r.skip(tag & 7);
  }
  return { position, responses };
}
