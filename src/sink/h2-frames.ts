/**
 * gRPC calls with one request body on a hand-framed HTTP/2 connection (RFC 9113), for calls whose
 * answer is proven by their response messages alone — the tail read (h2-read.ts) and the
 * multi-stream append (h2-append.ts), both through h2-framed-call.ts. Why: a request through
 * node:http2 costs ≈ 60–150 µs of CPU here (its `request`, an AsyncResource, a Duplex per
 * stream), one through the client's native bridge about as much; written as frames, many
 * requests go out in one socket write and their answers are cut from the bytes as they come
 * (bench/tail-read.bench.ts: ≈ 24 µs per tail read at 64 in flight, decoding included).
 *
 * What it leaves out, on purpose: it never decodes a header block (there is no HPACK decoder
 * here), so it cannot see a call's gRPC status or trailers. A call therefore answers only with
 * the DATA its stream carried up to END_STREAM, and with `null` for everything else — no message,
 * a reset stream, a GOAWAY that did not cover it, a lost connection, no answer within the
 * deadline. The caller decides what the messages prove, and asks again on its full path (the
 * client's own error classes, status and trailers) when they prove nothing. Header blocks it
 * sends are literal fields (no Huffman, no indexing), which every decoder accepts.
 *
 * Flow control: it opens its receive windows to the maximum at once and tops up the connection's
 * as it reads; it sends request bodies in DATA frames of at most the peer's frame size and within
 * the peer's connection window (the rest waits, in order, for the peer's WINDOW_UPDATE), and gives
 * `null` for a body larger than the peer's stream window (a stream's window is never waited for).
 * The socket comes from the caller's transport (h2-transport.ts): plain text, or TLS — where a
 * connection on which ALPN did not choose `h2` fails (its calls give `null`).
 */
import type net from 'node:net';
import { PLAIN_TRANSPORT, speaksH2, type H2Transport } from './h2-transport.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const DATA = 0x0;
const HEADERS = 0x1;
const RST_STREAM = 0x3;
const SETTINGS = 0x4;
const PUSH_PROMISE = 0x5;
const PING = 0x6;
const GOAWAY = 0x7;
const WINDOW_UPDATE = 0x8;
const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const SETTINGS_ENABLE_PUSH = 0x2;
const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
const SETTINGS_MAX_FRAME_SIZE = 0x5;
const MAX_WINDOW = 2 ** 31 - 1;
const DEFAULT_WINDOW = 65_535;
const DEFAULT_MAX_FRAME = 16_384;
/** Receive-window bytes read before the connection's window is topped up again. */
const WINDOW_REFILL = 1 << 20;
/** Client stream ids are odd and below 2^31. */
const LAST_STREAM_ID = 2 ** 31 - 1;
/** How often calls in flight are checked against their deadline. */
const SWEEP_MS = 100;

/** A request header block: literal fields, new names, no Huffman; `authorization` never indexed (RFC 7541 §6.2). */
export function encodeHeaderBlock(headers: readonly (readonly [string, string])[]): Buffer {
  const bytes: number[] = [];
  const integer = (value: number, prefixBits: number, first: number): void => {
    const max = (1 << prefixBits) - 1;
    if (value < max) {
      bytes.push(first | value);
      return;
    }
    bytes.push(first | max);
    value -= max;
    while (value >= 128) {
      bytes.push((value % 128) | 128);
      value = Math.floor(value / 128);
    }
    bytes.push(value);
  };
  const string = (text: string): void => {
    const encoded = Buffer.from(text, 'utf8');
    integer(encoded.length, 7, 0);
    for (const b of encoded) bytes.push(b);
  };
  for (const [name, value] of headers) {
    integer(0, 4, name === 'authorization' ? 0x10 : 0x00);
    string(name.toLowerCase());
    string(value);
  }
  return Buffer.from(bytes);
}

/** A frame: its 9-byte header, then `payload`. */
function frame(type: number, flags: number, stream: number, payload: Buffer | null): Buffer {
  const length = payload?.length ?? 0;
  const out = Buffer.allocUnsafe(9 + length);
  out.writeUIntBE(length, 0, 3);
  out[3] = type;
  out[4] = flags;
  out.writeUInt32BE(stream, 5);
  payload?.copy(out, 9);
  return out;
}

function settingsFrame(entries: readonly (readonly [number, number])[]): Buffer {
  const payload = Buffer.allocUnsafe(6 * entries.length);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, 6 * i);
    payload.writeUInt32BE(value, 6 * i + 2);
  });
  return frame(SETTINGS, 0, 0, payload);
}

function windowUpdate(stream: number, increment: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(increment, 0);
  return frame(WINDOW_UPDATE, 0, stream, payload);
}

/** A request not yet sent whole: its HEADERS frame (until sent), its body and how much of it went out (release() sends it). */
interface Waiting {
  readonly id: number;
  headers: Buffer | null;
  readonly body: Buffer;
  sent: number;
}

interface Call {
  readonly giveUpAt: number;
  readonly resolve: (data: Buffer | null) => void;
  chunks: Buffer | Buffer[] | null;
}

export interface FramedConnection {
  /**
   * Sends one request (`headerBlock` from `encodeHeaderBlock`, `body` its gRPC-framed messages)
   * and resolves with the response's DATA once the stream ends — or with `null` (see above).
   * Never rejects. `timeoutMs`: give up (and drop the connection) that long after sending.
   */
  call(headerBlock: Buffer, body: Buffer, timeoutMs: number): Promise<Buffer | null>;
  /** False once the connection cannot take new calls (lost, refused by GOAWAY, out of stream ids). */
  readonly usable: boolean;
  /** True once the connection failed (an error, the peer closing without GOAWAY, no answer in time, a protocol error). */
  readonly lost: boolean;
  readonly inFlight: number;
  /** The largest body a call may have: the peer's stream window (as its settings say so far). */
  readonly maxBody: number;
  /** Takes no new calls; closes once the calls in flight end. */
  close(): void;
  destroy(): void;
}

export interface FramedConnectionOptions {
  readonly host: string;
  readonly port: number;
  /** Opens the socket (h2-transport.ts); plain text by default. */
  readonly connect?: H2Transport['connect'];
  /** The first stream id (odd); tests start near the end of the id space. */
  readonly firstStreamId?: number;
}

/** Opens a connection (the preface and settings go out at once; requests may follow immediately). */
export function openFramedConnection(options: FramedConnectionOptions): FramedConnection {
  const socket: net.Socket = (options.connect ?? PLAIN_TRANSPORT.connect)(options.host, options.port);
  const calls = new Map<number, Call>();
  let nextId = options.firstStreamId ?? 1;
  let usable = true;
  let lost = false;
  let closing = false;
  let sendWindow = DEFAULT_WINDOW;
  let peerStreamWindow = DEFAULT_WINDOW;
  let peerMaxFrame = DEFAULT_MAX_FRAME;
  let maxConcurrent = Infinity;
  let unread = 0;
  let pending: Buffer | null = null;
  /** Frames to write on the next flush, and requests waiting for the peer's connection window. */
  let out: Buffer[] = [];
  const waiting: Waiting[] = [];
  let flushing: ReturnType<typeof setImmediate> | null = null;
  let sweeper: ReturnType<typeof setInterval> | null = null;

  // No push, no streams opened by the server, our receive windows at the maximum from the start.
  const settings = settingsFrame([
    [SETTINGS_ENABLE_PUSH, 0],
    [SETTINGS_MAX_CONCURRENT_STREAMS, 0],
    [SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW],
  ]);
  socket.write(Buffer.concat([PREFACE, settings, windowUpdate(0, MAX_WINDOW - DEFAULT_WINDOW)]));
  socket.unref();

  function flush(): void {
    flushing = null;
    if (out.length === 0 || socket.destroyed) return;
    const frames = out.length === 1 ? out[0]! : Buffer.concat(out);
    out = [];
    socket.write(frames);
  }
  function send(frames: Buffer): void {
    out.push(frames);
    flushing ??= setImmediate(flush);
  }
  /**
   * Sends what the peer's connection window lets through, in order: each waiting request's
   * HEADERS, then its body in DATA frames of at most the window, the peer's frame size and what
   * is left. A body is never held back whole until the window has room for all of it — a peer
   * that tops the window up only after more of it was used (at half of it, like nghttp2) would
   * then never send the update.
   */
  function release(): void {
    while (waiting.length > 0) {
      const next = waiting[0]!;
      if (next.headers) {
        send(next.headers);
        next.headers = null;
      }
      const body = next.body;
      while (next.sent < body.length && sendWindow > 0) {
        const n = Math.min(sendWindow, peerMaxFrame, body.length - next.sent);
        const last = next.sent + n === body.length;
        send(frame(DATA, last ? END_STREAM : 0, next.id, body.subarray(next.sent, next.sent + n)));
        sendWindow -= n;
        next.sent += n;
      }
      if (next.sent < body.length) return;
      if (body.length === 0) send(frame(DATA, END_STREAM, next.id, null));
      waiting.shift();
    }
  }

  function finish(id: number, answered: boolean): void {
    const call = calls.get(id);
    if (!call) return;
    calls.delete(id);
    const chunks = call.chunks;
    if (!answered || chunks === null) call.resolve(null);
    else call.resolve(Array.isArray(chunks) ? Buffer.concat(chunks) : chunks);
    if (calls.size === 0) {
      socket.unref();
      if (closing || !usable) socket.destroy();
    }
  }
  function fail(): void {
    if (usable && !closing) lost = true;
    usable = false;
    for (const id of [...calls.keys()]) finish(id, false);
    waiting.length = 0;
    if (sweeper) clearInterval(sweeper);
    sweeper = null;
    socket.destroy();
  }

  function onFrame(buf: Buffer, at: number, length: number, type: number, flags: number, id: number): void {
    const start = at + 9;
    if (type === DATA) {
      unread += length;
      if (unread >= WINDOW_REFILL) {
        send(windowUpdate(0, unread));
        unread = 0;
      }
      const call = calls.get(id);
      if (call) {
        let from = start;
        let to = start + length;
        if (flags & PADDED) {
          from += 1;
          to -= buf[start]!;
        }
        if (to > from) {
          const piece = buf.subarray(from, to);
          const chunks = call.chunks;
          call.chunks = chunks === null ? piece : Array.isArray(chunks) ? (chunks.push(piece), chunks) : [chunks, piece];
        }
      }
      if (flags & END_STREAM) finish(id, true);
    } else if (type === HEADERS) {
      if (flags & END_STREAM) finish(id, true);
    } else if (type === RST_STREAM) {
      finish(id, false);
    } else if (type === SETTINGS) {
      if (flags & ACK) return;
      for (let o = start; o + 6 <= start + length; o += 6) {
        const key = buf.readUInt16BE(o);
        const value = buf.readUInt32BE(o + 2);
        if (key === SETTINGS_MAX_CONCURRENT_STREAMS) maxConcurrent = value;
        else if (key === SETTINGS_INITIAL_WINDOW_SIZE) peerStreamWindow = value;
        else if (key === SETTINGS_MAX_FRAME_SIZE) peerMaxFrame = value;
      }
      send(frame(SETTINGS, ACK, 0, null));
    } else if (type === PING) {
      if (!(flags & ACK)) send(frame(PING, ACK, 0, buf.subarray(start, start + length)));
    } else if (type === GOAWAY) {
      usable = false;
      const last = buf.readUInt32BE(start) & 0x7fffffff;
      for (const callId of [...calls.keys()]) if (callId > last) finish(callId, false);
      if (calls.size === 0) socket.destroy();
    } else if (type === WINDOW_UPDATE) {
      if (id === 0) {
        sendWindow += buf.readUInt32BE(start) & 0x7fffffff;
        release();
      }
    } else if (type === PUSH_PROMISE) {
      fail(); // push was disabled in our settings: a protocol error
    }
    // CONTINUATION (header blocks are not decoded), PRIORITY, unknown types: nothing to do.
  }

  socket.on('data', (chunk: Buffer) => {
    const buf = pending ? Buffer.concat([pending, chunk]) : chunk;
    let at = 0;
    while (buf.length - at >= 9) {
      const length = buf.readUIntBE(at, 3);
      if (length > DEFAULT_MAX_FRAME) return fail(); // larger than we allow (our settings keep the default)
      if (buf.length - at - 9 < length) break;
      onFrame(buf, at, length, buf[at + 3]!, buf[at + 4]!, buf.readUInt32BE(at + 5) & 0x7fffffff);
      if (socket.destroyed) return;
      at += 9 + length;
    }
    pending = at < buf.length ? buf.subarray(at) : null;
  });
  socket.on('error', fail);
  socket.on('close', fail);
  socket.once('secureConnect', () => {
    if (!speaksH2(socket)) fail();
  });

  function sweep(): void {
    const now = Date.now();
    for (const call of calls.values()) if (now >= call.giveUpAt) return fail(); // a peer that stopped answering
    if (calls.size === 0 && sweeper) {
      clearInterval(sweeper);
      sweeper = null;
    }
  }

  return {
    call(headerBlock, body, timeoutMs) {
      if (!usable || closing || calls.size >= maxConcurrent || body.length > peerStreamWindow || headerBlock.length > peerMaxFrame) {
        return Promise.resolve(null);
      }
      const id = nextId;
      nextId += 2;
      if (nextId > LAST_STREAM_ID) usable = false;
      return new Promise((resolve) => {
        calls.set(id, { giveUpAt: Date.now() + timeoutMs, resolve, chunks: null });
        if (calls.size === 1) socket.ref();
        waiting.push({ id, headers: frame(HEADERS, END_HEADERS, id, headerBlock), body, sent: 0 });
        release();
        if (!sweeper) {
          sweeper = setInterval(sweep, SWEEP_MS);
          sweeper.unref();
        }
      });
    },
    get usable() {
      return usable && !closing;
    },
    get lost() {
      return lost;
    },
    get inFlight() {
      return calls.size;
    },
    get maxBody() {
      return peerStreamWindow;
    },
    close() {
      closing = true;
      if (calls.size === 0) fail();
    },
    destroy: fail,
  };
}
