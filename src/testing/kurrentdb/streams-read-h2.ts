// Plain stream reads (Streams.Read on a stream with a count: the sink's and the bridge's tail
// reads) and catch-up subscriptions served straight off the HTTP/2 stream, like AppendSession
// (streams-v2-service.ts): grpc-js spends more CPU on a call — its interceptors, metadata, writable
// stream, status — than a tail read itself, and per message sent more than encoding the event.
// The request is decoded from the call's first DATA chunk (by hand for a plain read, read-codec.ts;
// by google-protobuf for a subscription, once per subscription); anything else ($all reads, a
// request split over chunks) goes to grpc-js as it came, the chunk put back. Same answers as the
// grpc-js handler (streams-read.ts: streamReadAnswer; streams-subscribe.ts over
// h2-subscription-call.ts).
import type http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { answerError, answerMessages, statusError } from './h2-answer.js';
import { h2SubscriptionCall } from './h2-subscription-call.js';
import { streamsPb } from './proto.js';
import { decodeStreamReadRequest, type StreamReadRequest } from './read-codec.js';
import { streamReadAnswer } from './streams-read.js';
import { isSubscription, subscribe, type SubscriptionContext } from './streams-subscribe.js';

export const READ_PATH = '/event_store.client.streams.Streams/Read';

/** The subscription request in `bytes`, or null (not one, or not decodable: grpc-js's business). */
function subscriptionOptions(bytes: Buffer): streamsPb.ReadReq.Options | null {
  try {
    const options = streamsPb.ReadReq.deserializeBinary(bytes).getOptions();
    return options && isSubscription(options) ? options : null;
  } catch {
    return null;
  }
}

/**
 * Serves `stream` if its request is a plain stream read or a subscription; otherwise calls
 * `fallback` (grpc-js's handler) with the stream as it was, its first chunk unread.
 */
export function serveStreamRead(context: SubscriptionContext, stream: http2.ServerHttp2Stream, fallback: () => void): void {
  const { store } = context;
  let request: StreamReadRequest | streamsPb.ReadReq.Options | null = null;
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
    request = whole ? (decodeStreamReadRequest(chunk.subarray(5)) ?? subscriptionOptions(chunk.subarray(5))) : null;
    if (request) return; // answered (or subscribed) at the end of the request, as grpc-js does
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
    if (request instanceof streamsPb.ReadReq.Options) {
      subscribe(context, h2SubscriptionCall(stream), request);
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
