// A catch-up subscription's call over the raw HTTP/2 stream (streams-read-h2.ts): what
// streams-subscribe.ts needs of a grpc-js ServerWritableStream — `write`, `emit('error')`, and
// 'cancelled' / 'close' / 'error' events — written as grpc-js writes it (headers with the first
// message, each message behind its 5-byte gRPC header, the status in trailers; an error before any
// message as a trailers-only answer). Messages written in one synchronous run (a commit's events,
// a catch-up) go out as one HTTP/2 write instead of one each through grpc-js's writable stream.
import { EventEmitter } from 'node:events';
import type http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { answerError } from './h2-answer.js';
import type { SubscriptionCall } from './read-messages.js';
import type { streamsPb } from './proto.js';

/** Messages queued past this many bytes are written at once, not at the end of the run. */
const FLUSH_BYTES = 1024 * 1024;

class H2SubscriptionCall extends EventEmitter implements SubscriptionCall {
  private headersSent = false;
  private finished = false;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private scheduled = false;
  private trailers: http2.OutgoingHttpHeaders = { 'grpc-status': '0', 'grpc-message': 'OK' };

  constructor(private readonly stream: http2.ServerHttp2Stream) {
    super();
    // grpc-js's ServerWritableStreamImpl: an 'error' emitted on the call ends it with that status.
    this.on('error', (error: grpc.ServerErrorResponse) => this.fail(error));
    stream.on('close', () => {
      if (!this.finished) {
        this.finished = true;
        this.emit('cancelled', 'cancelled');
      }
      this.emit('close');
    });
    stream.on('error', () => undefined); // a reset stream: 'close' follows
  }

  write(message: streamsPb.ReadResp | Buffer): boolean {
    if (this.finished || this.stream.destroyed || this.stream.closed) return false;
    const bytes = Buffer.isBuffer(message) ? message : Buffer.from(message.serializeBinary());
    this.pending.push(bytes);
    this.pendingBytes += 5 + bytes.length;
    if (this.pendingBytes >= FLUSH_BYTES) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => this.flush());
    }
    return true;
  }

  private flush(): void {
    this.scheduled = false;
    if (this.pending.length === 0 || this.stream.destroyed || this.stream.closed) return;
    const framed = Buffer.allocUnsafe(this.pendingBytes);
    let o = 0;
    for (const message of this.pending) {
      framed[o] = 0;
      framed.writeUInt32BE(message.length, o + 1);
      message.copy(framed, o + 5);
      o += 5 + message.length;
    }
    this.pending = [];
    this.pendingBytes = 0;
    if (!this.headersSent) {
      this.headersSent = true;
      this.stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      this.stream.once('wantTrailers', () => this.stream.sendTrailers(this.trailers));
    }
    this.stream.write(framed);
  }

  private fail(error: grpc.ServerErrorResponse): void {
    if (this.finished) return;
    this.finished = true;
    this.flush();
    if (!this.headersSent) {
      answerError(this.stream, error);
      return;
    }
    if (this.stream.destroyed || this.stream.closed) return;
    this.trailers = {
      ...(error.metadata ? error.metadata.toHttp2Headers() : {}),
      'grpc-status': String(error.code ?? grpc.status.UNKNOWN),
      'grpc-message': encodeURIComponent(error.details ?? error.message),
    };
    this.stream.end();
  }
}

export function h2SubscriptionCall(stream: http2.ServerHttp2Stream): SubscriptionCall {
  return new H2SubscriptionCall(stream);
}
