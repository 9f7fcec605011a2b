// The protobuf wire format, as far as the hand-encoded messages of the sink need it
// (v2-append.ts: AppendRecord/AppendRequest; v1-read.ts: ReadReq).

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
