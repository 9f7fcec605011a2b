// The AppendSession answer encoded by hand: one output per stream of a multi-stream append
// (~220 in the benchmark's), where google-protobuf built and serialized an object per stream.
// The bytes are those google-protobuf writes (test/unit/kurrentdb-v2-response.test.ts compares them).
//   AppendSessionResponse { repeated AppendResponse output = 1; sint64 position = 2; }
//   AppendResponse        { string stream = 1; sint64 stream_revision = 2; … }
// (kurrentdb/protocols/v2/streams/streams.proto; zero values are not written.)

const LEN = 2;

/** A sint64's ZigZag encoding, as an unsigned 64-bit value. */
const zigzag = (n: bigint): bigint => BigInt.asUintN(64, (n << 1n) ^ (n >> 63n));

function varintSize(n: bigint): number {
  let size = 1;
  while (n >= 0x80n) {
    n >>= 7n;
    size += 1;
  }
  return size;
}

function writeVarint(b: Buffer, o: number, n: bigint | number): number {
  if (typeof n === 'number' || n < 0x1fffffffffffffn) {
    let v = Number(n);
    while (v >= 0x80) {
      b[o++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    b[o++] = v;
    return o;
  }
  while (n >= 0x80n) {
    b[o++] = Number(n & 0x7fn) | 0x80;
    n >>= 7n;
  }
  b[o++] = Number(n);
  return o;
}

export interface AppendOutput {
  readonly streamName: string;
  readonly revision: bigint;
}

/** AppendSessionResponse with `outputs` in order and the write's `position`. */
export function encodeAppendSessionResponse(outputs: readonly AppendOutput[], position: bigint): Buffer {
  const names = outputs.map((output) => Buffer.byteLength(output.streamName, 'utf8'));
  const revisions = outputs.map((output) => zigzag(output.revision));
  const sizes = outputs.map((_, i) => {
    const name = names[i]!;
    const revision = revisions[i]!;
    return (name > 0 ? 1 + varintSize(BigInt(name)) + name : 0) + (revision !== 0n ? 1 + varintSize(revision) : 0);
  });
  const zigzagPosition = zigzag(position);
  let total = zigzagPosition !== 0n ? 1 + varintSize(zigzagPosition) : 0;
  for (const size of sizes) total += 1 + varintSize(BigInt(size)) + size;
  const b = Buffer.allocUnsafe(total);
  let o = 0;
  outputs.forEach((output, i) => {
    b[o++] = (1 << 3) | LEN;
    o = writeVarint(b, o, sizes[i]!);
    if (names[i]! > 0) {
      b[o++] = (1 << 3) | LEN;
      o = writeVarint(b, o, names[i]!);
      o += b.write(output.streamName, o, 'utf8');
    }
    if (revisions[i]! !== 0n) {
      b[o++] = 2 << 3;
      o = writeVarint(b, o, revisions[i]!);
    }
  });
  if (zigzagPosition !== 0n) {
    b[o++] = 2 << 3;
    o = writeVarint(b, o, zigzagPosition);
  }
  if (o !== total) throw new Error(`encodeAppendSessionResponse: wrote ${o} of ${total} bytes`);
  return b;
}
