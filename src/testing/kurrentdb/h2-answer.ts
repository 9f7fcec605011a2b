// Answers of the gRPC calls the in-memory KurrentDB serves straight off the HTTP/2 stream
// (AppendSession: streams-v2-service.ts; plain stream reads: streams-read-h2.ts), written as
// grpc-js writes them: the messages as DATA (each behind its 5-byte gRPC header), then trailers;
// an error as a trailers-only answer (status, message, the error's metadata).
import type http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';

/**
 * The messages (each already encoded) framed, then status OK with `statusMessage` (grpc-js writes
 * "OK"; the AppendSession route has always written nothing).
 */
export function answerMessages(stream: http2.ServerHttp2Stream, messages: readonly Buffer[], statusMessage = ''): void {
  if (stream.destroyed || stream.closed) return;
  let size = 0;
  for (const message of messages) size += 5 + message.length;
  const framed = Buffer.allocUnsafe(size);
  let o = 0;
  for (const message of messages) {
    framed[o] = 0;
    framed.writeUInt32BE(message.length, o + 1);
    message.copy(framed, o + 5);
    o += 5 + message.length;
  }
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': statusMessage }));
  stream.end(framed);
}

/** A trailers-only answer with the error's status, message and metadata. */
export function answerError(stream: http2.ServerHttp2Stream, error: grpc.ServerErrorResponse): void {
  if (stream.destroyed || stream.closed) return;
  const trailers = error.metadata ? error.metadata.toHttp2Headers() : {};
  stream.respond(
    {
      ':status': 200,
      'content-type': 'application/grpc',
      ...trailers,
      'grpc-status': String(error.code ?? grpc.status.UNKNOWN),
      'grpc-message': encodeURIComponent(error.details ?? error.message),
    },
    { endStream: true },
  );
}

/** An error with a status and no metadata of its own. */
export function statusError(code: grpc.status, details: string): grpc.ServerErrorResponse {
  return Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
}
