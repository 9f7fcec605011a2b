// The protobuf wire format, as far as the hand-encoded messages of the sink need it
// (v2-append.ts: AppendRecord/AppendRequest; v1-read.ts: ReadReq), and reading what comes back
// (v1-read.ts: read responses; v2-append.ts: a compacted event's own record).

/** Wire type of a length-delimited field (strings, bytes, messages). */
export const LEN = 2;
/** Wire type of a varint field. */
export const VARINT = 0;

export function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size += 1;
  }
  return size;
}

/** Writes `n` as a varint at `offset`; returns the offset after it. */
export function writeVarint(buffer: Buffer, offset: number, n: number): number {
  while (n >= 0x80) {
    buffer[offset++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  buffer[offset++] = n;
  return offset;
}

/** Bytes of a length-delimited field (one-byte tag) whose content is `length` bytes. */
export const fieldSize = (length: number): number => 1 + varintSize(length) + length;

/** A cursor over one protobuf message in `buf[pos, end)`. */
export interface Cursor {
  readonly buf: Buffer;
  pos: number;
}

export function readVarint(c: Cursor): number {
  // Up to 2^53 exactly in a number; revisions and lengths stay far below.
  let result = 0;
  let factor = 1;
  for (let i = 0; i < 10; i++) {
    const b = c.buf[c.pos++];
    if (b === undefined) throw new Error('truncated varint');
    result += (b & 0x7f) * factor;
    if (b < 0x80) return result;
    factor *= 128;
  }
  throw new Error('varint longer than 10 bytes');
}

/** The end of a length-delimited field whose tag was just read. */
export function lenEnd(c: Cursor, end: number): number {
  const length = readVarint(c);
  const fieldEnd = c.pos + length;
  if (fieldEnd > end) throw new Error('length-delimited field past the end of its message');
  return fieldEnd;
}

export function skip(c: Cursor, wireType: number, end: number): void {
  switch (wireType) {
    case 0:
      readVarint(c);
      return;
    case 1:
      c.pos += 8;
      break;
    case 2:
      c.pos = lenEnd(c, end);
      return;
    case 5:
      c.pos += 4;
      break;
    default:
      throw new Error(`unsupported wire type ${wireType}`);
  }
  if (c.pos > end) throw new Error('field past the end of its message');
}
