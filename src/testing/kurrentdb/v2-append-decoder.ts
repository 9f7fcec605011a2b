// Decodes v2 `AppendRequest` messages (AppendSession) straight from the wire, without
// google-protobuf objects: the in-memory server stands in for KurrentDB (C#) in benchmarks, and
// building a `Value` object per record property cost it ~0.25 ms per stream request.
// Field numbers: kurrentdb/protocols/v2/streams/streams.proto (see src/sink/v2-append.ts).
import structPb from 'google-protobuf/google/protobuf/struct_pb.js';

export interface DecodedAppendRecord {
  readonly id: string | null;
  readonly properties: Readonly<Record<string, unknown>>;
  readonly schema: { readonly format: number; readonly name: string } | null;
  readonly data: Uint8Array;
}

export interface DecodedAppendRequest {
  readonly stream: string;
  readonly records: readonly DecodedAppendRecord[];
  /** `null` when not sent ("any"). */
  readonly expectedRevision: bigint | null;
}

class Reader {
  offset: number;
  constructor(
    readonly bytes: Buffer,
    start: number,
    readonly end: number,
  ) {
    this.offset = start;
  }

  get done(): boolean {
    return this.offset >= this.end;
  }

  varint(): number {
    let result = 0;
    let scale = 1;
    for (;;) {
      if (this.offset >= this.end) throw new Error('truncated varint');
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
      if (this.offset >= this.end) throw new Error('truncated varint');
      const b = this.bytes[this.offset++]!;
      result |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return result;
      shift += 7n;
    }
  }

  /** A length-delimited field: its [start, end). */
  span(): [number, number] {
    const length = this.varint();
    const start = this.offset;
    this.offset += length;
    if (this.offset > this.end) throw new Error('truncated field');
    return [start, this.offset];
  }

  string(): string {
    const [start, end] = this.span();
    return this.bytes.toString('utf8', start, end);
  }

  skipField(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.offset += 8;
    else if (wireType === 2) this.span();
    else if (wireType === 5) this.offset += 4;
    else throw new Error(`unsupported wire type ${wireType}`);
  }
}

function decodeValue(bytes: Buffer, start: number, end: number): unknown {
  const r = new Reader(bytes, start, end);
  let value: unknown = null;
  while (!r.done) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (field === 1 && wire === 0) {
      r.varint();
      value = null;
    } else if (field === 2 && wire === 1) {
      value = bytes.readDoubleLE(r.offset);
      r.offset += 8;
    } else if (field === 3 && wire === 2) value = r.string();
    else if (field === 4 && wire === 0) value = r.varint() !== 0;
    else if ((field === 5 || field === 6) && wire === 2) {
      // A struct or a list: rare in properties; google-protobuf renders it as the client sent it.
      return structPb.Value.deserializeBinary(new Uint8Array(bytes.buffer, bytes.byteOffset + start, end - start)).toJavaScript();
    } else r.skipField(wire);
  }
  return value;
}

/** The varint at `offset`; where it ends is left in `varintEnd` (no tuple per read). */
function readVarint(bytes: Buffer, offset: number, end: number): number {
  let result = 0;
  let scale = 1;
  for (let o = offset; ; ) {
    if (o >= end) throw new Error('truncated varint');
    const b = bytes[o++]!;
    result += (b & 0x7f) * scale;
    if (b < 0x80) {
      varintEnd = o;
      return result;
    }
    scale *= 128;
  }
}
/** Where the last `readVarint` stopped (module state: the decoder is synchronous). */
let varintEnd = 0;

/**
 * One property map entry `{ string key = 1; Value value = 2 }`, read in place (no reader objects:
 * a record carries ~25 properties and the server decodes every one).
 */
function decodeProperty(bytes: Buffer, start: number, end: number, into: Record<string, unknown>): void {
  let key = '';
  let value: unknown = null;
  let o = start;
  while (o < end) {
    const tag = readVarint(bytes, o, end);
    o = varintEnd;
    if (tag === 0x0a || tag === 0x12) {
      const length = readVarint(bytes, o, end);
      const s = varintEnd;
      const e = s + length;
      if (e > end) throw new Error('truncated field');
      if (tag === 0x0a) key = bytes.toString('utf8', s, e);
      else if (e > s && bytes[s] === 0x1a) {
        // The common case: Value { string_value = 3 } and nothing else.
        const l = readVarint(bytes, s + 1, e);
        value = varintEnd + l === e ? bytes.toString('utf8', varintEnd, e) : decodeValue(bytes, s, e);
      } else value = decodeValue(bytes, s, e);
      o = e;
    } else {
      const r = new Reader(bytes, o, end);
      r.skipField(tag & 7);
      o = r.offset;
    }
  }
  into[key] = value;
}

function decodeRecord(bytes: Buffer, start: number, end: number): DecodedAppendRecord {
  const r = new Reader(bytes, start, end);
  let id: string | null = null;
  const properties: Record<string, unknown> = {};
  let schema: { format: number; name: string } | null = null;
  let data: Uint8Array = new Uint8Array(0);
  while (!r.done) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (wire !== 2) {
      r.skipField(wire);
      continue;
    }
    const length = r.varint();
    const s = r.offset;
    const e = s + length;
    if (e > end) throw new Error('truncated field');
    r.offset = e;
    if (field === 1) id = bytes.toString('utf8', s, e);
    else if (field === 2) decodeProperty(bytes, s, e, properties);
    else if (field === 3) {
      const sr = new Reader(bytes, s, e);
      const info = { format: 0, name: '' };
      while (!sr.done) {
        const t = sr.varint();
        if (t === 0x08) info.format = sr.varint();
        else if (t === 0x12) info.name = sr.string();
        else sr.skipField(t & 7);
      }
      schema = info;
    } else if (field === 4) data = new Uint8Array(bytes.subarray(s, e));
  }
  return { id, properties, schema, data };
}

export function decodeAppendRequest(bytes: Buffer): DecodedAppendRequest {
  const r = new Reader(bytes, 0, bytes.length);
  let stream = '';
  const records: DecodedAppendRecord[] = [];
  let expectedRevision: bigint | null = null;
  while (!r.done) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (field === 1 && wire === 2) stream = r.string();
    else if (field === 2 && wire === 2) {
      const [s, e] = r.span();
      records.push(decodeRecord(bytes, s, e));
    } else if (field === 3 && wire === 0) {
      const z = r.bigVarint();
      expectedRevision = z & 1n ? -(z >> 1n) - 1n : z >> 1n;
    } else r.skipField(wire);
  }
  return { stream, records, expectedRevision };
}
