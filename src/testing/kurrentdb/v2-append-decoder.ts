// Decodes v2 `AppendRequest` messages (AppendSession) straight from the wire, without
// google-protobuf objects: the in-memory server stands in for KurrentDB (C#) in benchmarks, and
// building a `Value` object per record property cost it ~0.25 ms per stream request.
// Field numbers: kurrentdb/protocols/v2/streams/streams.proto (see src/sink/v2-append.ts).
import structPb from 'google-protobuf/google/protobuf/struct_pb.js';

export interface DecodedAppendRecord {
  readonly id: string | null;
  /** The properties, decoded — or `null` when `metadataJson` was made straight from the bytes. */
  readonly properties: Readonly<Record<string, unknown>> | null;
  /**
   * The event's metadata JSON (properties, then the `metadataTail`), made straight from the
   * request bytes — exactly what `JSON.stringify` makes of the properties plus the two keys — when
   * every property is a string value of plain ASCII, no key repeats and none is one of the
   * server's own `$schema.name` / `$schema.format`; `null` otherwise.
   */
  readonly metadataJson: Buffer | null;
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

const ARRAY_INDEX = /^(?:0|[1-9][0-9]*)$/;

/**
 * Where the bytes the store keeps (each record's data and metadata JSON) are copied to: views on
 * shared 256 KiB slabs rather than an ArrayBuffer each — a backing store per event made the
 * garbage collector's work grow with every event stored. Stored events are never freed, so a
 * slab's space is never wasted (save its unused end); large records get their own buffer.
 */
const SLAB_SIZE = 256 * 1024;
let slab = Buffer.alloc(0);
let slabUsed = 0;

/** Where the last `keep` put its copy (module state, like `varintEnd`: no object per copy). */
let keptBuffer: ArrayBufferLike = slab.buffer;
let keptOffset = 0;

/** Copies `bytes[start, end)` to a slab (or a buffer of its own); the copy is at `keptBuffer`/`keptOffset`. */
function keep(bytes: Buffer, start: number, end: number): void {
  const length = end - start;
  if (length > SLAB_SIZE / 16) {
    const own = new Uint8Array(bytes.subarray(start, end));
    keptBuffer = own.buffer;
    keptOffset = 0;
    return;
  }
  if (slabUsed + length > slab.length) {
    slab = Buffer.allocUnsafeSlow(SLAB_SIZE);
    slabUsed = 0;
  }
  bytes.copy(slab, slabUsed, start, end);
  keptBuffer = slab.buffer;
  keptOffset = slab.byteOffset + slabUsed;
  slabUsed += length;
}

/** Scratch space for the fast path (grown as needed); the result is copied out at its exact size. */
let scratch = Buffer.allocUnsafe(64 * 1024);
/** FNV-1a hashes of the keys of the record being decoded (duplicates are looked for among them). */
let keyHashes = new Int32Array(64);

/** 1 for the bytes JSON quotes as themselves: printable ASCII but `"` and `\\`. */
const PLAIN_BYTE = new Uint8Array(256);
for (let b = 0x20; b <= 0x7e; b++) if (b !== 0x22 && b !== 0x5c) PLAIN_BYTE[b] = 1;

/**
 * Copies `bytes[start, end)` to `scratch` at `o` if it is printable ASCII without `"` and `\\`
 * (JSON-quoted as itself); returns the new offset, or -1. (Values are short: a copy byte by byte
 * beats `Buffer#copy`, which makes a view per call.)
 */
function copyPlain(bytes: Buffer, start: number, end: number, o: number): number {
  for (let i = start; i < end; i++) {
    const b = bytes[i]!;
    if (PLAIN_BYTE[b] === 0) return -1;
    scratch[o++] = b;
  }
  return o;
}

/** Where the last `plainKeyHash` found its key plain (module state: no object per key). */
let keyPlain = false;

/** FNV-1a of `bytes[start, end)` (keys only: repeated keys are looked for among these); sets `keyPlain`. */
function plainKeyHash(bytes: Buffer, start: number, end: number): number {
  let hash = 0x811c9dc5;
  let plain = 1;
  for (let i = start; i < end; i++) {
    const b = bytes[i]!;
    plain &= PLAIN_BYTE[b]!;
    hash = Math.imul(hash ^ b, 0x01000193);
  }
  keyPlain = plain === 1;
  return hash;
}

/**
 * The fast path for a record's properties (field 2 entries at `entries`, as `[start, end)` pairs):
 * when each entry is exactly `{ key = 1; value = 2 { string_value = 3 } }`, all plain ASCII, keys
 * distinct and none the server's own `$schema.name` / `$schema.format`, the metadata JSON is
 * written in one pass from the request bytes: `{`, `"k":"v",` per entry in wire order, then
 * `tail` — the same bytes JSON.stringify gives. `null` otherwise (the caller decodes the entries).
 * With ~25 properties a record, building and serializing an object per event was the in-memory
 * server's largest cost in the benchmark.
 */
function plainMetadataJson(bytes: Buffer, entries: readonly number[], tail: Buffer): Buffer | null {
  // Each entry's protobuf overhead (2 tags, 2 lengths, the Value wrapper) is at least the 6 bytes
  // of `"":"",`: the entries' length bounds the output.
  let bound = 1 + tail.length;
  for (let i = 0; i < entries.length; i += 2) bound += entries[i + 1]! - entries[i]!;
  if (scratch.length < bound) scratch = Buffer.allocUnsafe(Math.max(bound, scratch.length * 2));
  const count = entries.length / 2;
  if (keyHashes.length < count) keyHashes = new Int32Array(Math.max(count, keyHashes.length * 2));
  scratch[0] = 0x7b; // {
  let o = 1;
  for (let i = 0; i < entries.length; i += 2) {
    const start = entries[i]!;
    const end = entries[i + 1]!;
    // key: 0x0a len bytes; value: 0x12 len (0x1a len bytes), nothing else.
    if (bytes[start] !== 0x0a) return null;
    const keyLength = readVarint(bytes, start + 1, end);
    const ks = varintEnd;
    const ke = ks + keyLength;
    if (ke >= end || bytes[ke] !== 0x12) return null;
    const valueLength = readVarint(bytes, ke + 1, end);
    const vs0 = varintEnd;
    if (vs0 + valueLength !== end || bytes[vs0] !== 0x1a) return null;
    const stringLength = readVarint(bytes, vs0 + 1, end);
    const vs = varintEnd;
    if (vs + stringLength !== end) return null;
    const hash = plainKeyHash(bytes, ks, ke);
    if (!keyPlain) return null;
    scratch[o++] = 0x22;
    for (let k = ks; k < ke; k++) scratch[o++] = bytes[k]!;
    for (let j = 0; j < i / 2; j++) if (keyHashes[j] === hash) return null; // a repeated key (or a collision): decode
    keyHashes[i / 2] = hash;
    const first = bytes[ks];
    if (first === 0x24 /* $ */ || (first !== undefined && first >= 0x30 && first <= 0x39)) {
      const key = bytes.toString('latin1', ks, ke);
      if (key === '$schema.name' || key === '$schema.format') return null;
      // An integer-like key ("7") comes first in a JS object, so JSON.stringify would move it.
      if (ARRAY_INDEX.test(key)) return null;
    }
    scratch[o++] = 0x22;
    scratch[o++] = 0x3a;
    scratch[o++] = 0x22;
    o = copyPlain(bytes, vs, vs + stringLength, o);
    if (o < 0) return null;
    scratch[o++] = 0x22;
    scratch[o++] = 0x2c;
  }
  o += tail.copy(scratch, o);
  keep(scratch, 0, o);
  return Buffer.from(keptBuffer, keptOffset, o);
}

function decodeRecord(bytes: Buffer, start: number, end: number, metadataTail?: MetadataTail): DecodedAppendRecord {
  const r = new Reader(bytes, start, end);
  let id: string | null = null;
  /** The property entries' [start, end) pairs; decoded after the loop. */
  const entries: number[] = [];
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
    else if (field === 2) entries.push(s, e);
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
    } else if (field === 4) {
      // A plain Uint8Array, as before (a view on the slab's copy).
      keep(bytes, s, e);
      data = new Uint8Array(keptBuffer, keptOffset, e - s);
    }
  }
  const metadataJson = metadataTail ? plainMetadataJson(bytes, entries, metadataTail(schema?.format ?? 0, schema?.name ?? '')) : null;
  if (metadataJson) return { id, properties: null, metadataJson, schema, data };
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < entries.length; i += 2) decodeProperty(bytes, entries[i]!, entries[i + 1]!, properties);
  return { id, properties, metadataJson: null, schema, data };
}

/**
 * What the server adds after a record's properties in its metadata JSON, given the record's schema
 * format and name: `"$schema.name":…,"$schema.format":…}` as bytes.
 */
export type MetadataTail = (format: number, name: string) => Buffer;

/** Decodes one AppendRequest; with `metadataTail`, plain records come with their metadata JSON made. */
export function decodeAppendRequest(bytes: Buffer, metadataTail?: MetadataTail): DecodedAppendRequest {
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
      records.push(decodeRecord(bytes, s, e, metadataTail));
    } else if (field === 3 && wire === 0) {
      const z = r.bigVarint();
      expectedRevision = z & 1n ? -(z >> 1n) - 1n : z >> 1n;
    } else r.skipField(wire);
  }
  return { stream, records, expectedRevision };
}
