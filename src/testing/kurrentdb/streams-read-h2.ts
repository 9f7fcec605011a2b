// Plain stream reads (Streams.Read on a stream with a count: the sink's and the bridge's tail
// reads) served straight off the HTTP/2 stream, like AppendSession (streams-v2-service.ts): grpc-js
// spends more CPU on a call — its interceptors, metadata, writable stream, status — than the read
// itself. The request is decoded by hand (read-codec.ts) from the call's first DATA chunk; anything
// else (a $all read, a subscription, a filter, a request split over chunks) goes to grpc-js as it
// came, the chunk put back. Same answers as the grpc-js handler (streams-read.ts: streamReadAnswer).
import type http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { answerError, answerMessages, statusError } from './h2-answer.js';
import { decodeStreamReadRequest, type StreamReadRequest } from './read-codec.js';
import type { EventStore } from './store.js';
import { streamReadAnswer } from './streams-read.js';

export const READ_PATH = '/event_store.client.streams.Streams/Read';

/**
 * Serves `stream` if its request is a plain stream read; otherwise calls `fallback` (grpc-js's
 * handler) with the stream as it was, its first chunk unread.
 */
export function serveStreamRead(store: Pick<EventStore, 'readStream'>, stream: http2.ServerHttp2Stream, fallback: () => void): void {
  let request: StreamReadRequest | null = null;
  let done = false;
  const finish = () => {
    done = true;
    stream.off('data', onData);
    stream.off('end', onEnd);
  };
  const onData = (chunk: Buffer) => {
    if (request) {
      // As grpc-js answers a second message of a server-streaming call.
      finish();
      answerError(stream, statusError(grpc.status.UNIMPLEMENTED, `Received a second request message for server streaming method ${READ_PATH}`));
      return;
    }
    const whole = chunk.length >= 5 && chunk[0] === 0 && chunk.readUInt32BE(1) === chunk.length - 5;
    request = whole ? decodeStreamReadRequest(chunk.subarray(5)) : null;
    if (request) return; // answered at the end of the request, as grpc-js does
    finish();
    stream.pause();
    stream.unshift(chunk);
    fallback();
  };
  const onEnd = () => {
    if (done) return;
    finish();
    if (!request) {
      answerError(stream, statusError(grpc.status.UNIMPLEMENTED, `Received no request message for server streaming method ${READ_PATH}`));
      return;
    }
    const answer = streamReadAnswer(store, request);
    if (answer.error) answerError(stream, answer.error);
    else answerMessages(stream, answer.messages, 'OK');
  };
  stream.on('data', onData);
  stream.on('end', onEnd);
  stream.on('error', finish);
}
