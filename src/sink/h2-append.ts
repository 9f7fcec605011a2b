/**
 * AppendSession (multi-stream append) over one plain HTTP/2 request per call: every stream's
 * AppendRequest framed as a gRPC message and written in one go — as frames on a connection of the
 * sink's own when the body fits a stream's window (h2-framed-call.ts), else through node:http2.
 *
 * Why not through grpc-js: its client-streaming calls send one message per event-loop turn (the
 * retrying call writes the next message only when the previous write has completed, and an
 * HTTP/2 write completes on a later turn). A multi-stream append carries one message per stream,
 * so a call of 250 transactions on 250 streams took 250 turns — measured: 256 streams per call
 * ≈ 88 ms with an idle event loop, ≈ 330 ms when each turn does 1 ms of other work (the
 * pipeline's decoding and mapping), against ≈ 9 ms for 16 streams.
 *
 * Everything around the bytes stays the client's (h2-grpc.ts: its `execute`, channel target,
 * headers, credentials and error conversion) — the same errors as its own `multiStreamAppend`.
 * Plain text or TLS as the connection string says (h2-transport.ts); grpc-js's client stream
 * (`appendEncoded`) remains for a client without the internals this needs.
 */
import type { KurrentDBClient } from '@kurrent/kurrentdb-client';
import v2StreamsGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/streams_grpc_pb.js';
import { createFramedCaller } from './h2-framed-call.js';
import { createH2GrpcCaller, forEachGrpcMessage } from './h2-grpc.js';
import type { H2Transport } from './h2-transport.js';
import { decodeAppendSessionResponse, encodeAppendSessionBody, type EncodedStreamAppend, type MultiStreamAppendResult } from './v2-append-session.js';

const PATH = '/kurrentdb.protocol.v2.streams.StreamsService/AppendSession';

export interface H2AppendTransport {
  append(requests: readonly EncodedStreamAppend[]): Promise<MultiStreamAppendResult>;
  /** Appends answered on the hand-framed connection (the rest went as node:http2 requests). */
  readonly framedAppends: number;
  close(): void;
}

/** The one AppendSessionResponse of a call. */
function decodeResponse(data: Buffer): MultiStreamAppendResult {
  let response: MultiStreamAppendResult | null = null;
  forEachGrpcMessage(data, (bytes, start, end) => {
    if (response) throw new Error('more than one response message');
    response = decodeAppendSessionResponse(bytes, start, end);
  });
  if (!response) throw new Error('no response message');
  return response;
}

/**
 * A framed call's answer: the one response message, naming the appended streams in order (the
 * server's record of what it wrote) — else null, and the full path answers (an error is a
 * trailers-only answer with no message: its status and details are what the client converts).
 */
function framedAnswer(requests: readonly EncodedStreamAppend[]): (data: Buffer) => MultiStreamAppendResult | null {
  return (data) => {
    const response = decodeResponse(data);
    if (response.responses.length !== requests.length) return null;
    for (let i = 0; i < requests.length; i++) if (response.responses[i]!.streamName !== requests[i]!.streamName) return null;
    return response;
  };
}

export interface H2AppendOptions {
  /** Plain text or TLS (h2-transport.ts); plain text by default. */
  readonly transport?: H2Transport;
  /** Appends on a hand-framed connection first (h2-framed-call.ts), node:http2 for the rest. @default true */
  readonly framed?: boolean;
  /** Longest wait for a framed answer (then the connection is dropped and the call goes the full path). */
  readonly timeoutMs?: number;
}

/**
 * Each call goes first on a hand-framed HTTP/2 connection when its body fits a stream's
 * flow-control window (768 KiB on KurrentDB, HTTP/2's default 64 KiB until the server's settings
 * arrive) — above all the small calls of a steady rate, where a node:http2 request's own CPU (its
 * `request`, an AsyncResource, a Duplex) is much of a call's cost — and as a node:http2 request
 * otherwise or when the framed call gives no answer. Sending it again there is safe: an append is
 * atomic and names specific expected revisions with deterministic ids, so a framed attempt that
 * did land is answered by the server's idempotency check, and one that did not meets the same
 * answer again — now with the client's status and error details.
 */
export function createH2AppendTransport(client: KurrentDBClient, options: H2AppendOptions = {}): H2AppendTransport | null {
  const caller = createH2GrpcCaller(client, options.transport);
  if (!caller) return null;
  const framed =
    options.framed === false
      ? null
      : createFramedCaller(client, v2StreamsGrpc.StreamsServiceClient, 'multiStreamAppend', PATH, { transport: options.transport, timeoutMs: options.timeoutMs, rerouteAfterPass: true });
  const full = (body: Buffer) => caller.call(v2StreamsGrpc.StreamsServiceClient, 'multiStreamAppend', PATH, body, decodeResponse);
  return {
    append(requests) {
      const body = encodeAppendSessionBody(requests);
      if (!framed) return full(body);
      return framed.call(body, framedAnswer(requests)).then((answer) => answer ?? full(body));
    },
    get framedAppends() {
      return framed?.counts.answered ?? 0;
    },
    close() {
      framed?.close();
      caller.close();
    },
  };
}
