/**
 * One JSON event appended to one stream with expected state `any` — the event the client's
 * `appendToStream(stream, jsonEvent({ type, data }))` writes (the same data text,
 * `JSON.stringify(data)`; metadata `type` and `content-type: application/json`; no custom
 * metadata; a random id), sent through `Streams.Append` with the data set as bytes.
 *
 * Why: the client hands google-protobuf its JSON data as base64 text, and google-protobuf decodes
 * that text back in JavaScript each time it serializes the message — twice for a BatchAppend.
 * The snapshot progress record carries the pins of two chunks (≈ 80 KB of JSON per chunk of
 * 1,024 rows): that decoding was ≈ 6 % of the assembler's CPU in the initial snapshot.
 * The call goes through the client's own gRPC client (channel, credentials, deadline, errors:
 * `convertToCommandError`), as the client's `appendToStream` does; without the internals this
 * relies on, the client's `appendToStream` is used.
 *
 * `createJsonAppender` (below) is what the snapshot progress store uses: the same event through
 * the sink's framed AppendSession path when the server has it, this call otherwise.
 */
import { randomUUID } from 'node:crypto';
import { jsonEvent, type KurrentDBClient } from '@kurrent/kurrentdb-client';
import commandErrors from '@kurrent/kurrentdb-client/dist/utils/CommandError.js';
import sharedPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/shared_pb.js';
import streamsGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_grpc_pb.js';
import streamsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_pb.js';
import { createH2AppendTransport, type H2AppendTransport } from './h2-append.js';
import { transportOf } from './h2-transport.js';
import { encodeAppendRecordSized, serverSupportsMultiStreamAppend, type ClientInternals } from './v2-append.js';

function internalsOf(client: KurrentDBClient): ClientInternals | null {
  const c = client as unknown as Partial<ClientInternals>;
  return typeof c.execute === 'function' && typeof c.callArguments === 'function' && typeof commandErrors?.convertToCommandError === 'function' ? (c as ClientInternals) : null;
}

/** The two messages of the call: the options (stream, expected state `any`), then the event. */
function appendMessages(stream: string, type: string, dataJson: string): [streamsPb.AppendReq, streamsPb.AppendReq] {
  const header = new streamsPb.AppendReq();
  const options = new streamsPb.AppendReq.Options();
  const identifier = new sharedPb.StreamIdentifier();
  identifier.setStreamName(Uint8Array.from(Buffer.from(stream, 'utf8')));
  options.setStreamIdentifier(identifier);
  options.setAny(new sharedPb.Empty());
  header.setOptions(options);
  const message = new streamsPb.AppendReq.ProposedMessage();
  const id = new sharedPb.UUID();
  id.setString(randomUUID());
  message.setId(id);
  message.getMetadataMap().set('type', type);
  message.getMetadataMap().set('content-type', 'application/json');
  const data = Buffer.from(dataJson, 'utf8');
  message.setData(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  const entry = new streamsPb.AppendReq();
  entry.setProposedMessage(message);
  return [header, entry];
}

/** Appends `{ type, data }` as a JSON event to `stream` (expected state `any`); resolves once it is durable. */
export async function appendJsonEvent(client: KurrentDBClient, stream: string, type: string, data: unknown): Promise<void> {
  const internals = internalsOf(client);
  if (!internals) {
    await client.appendToStream(stream, jsonEvent({ type, data: data as Record<string, unknown> }));
    return;
  }
  const dataJson = JSON.stringify(data);
  await internals.execute(streamsGrpc.StreamsClient, 'appendToStream', (grpcClient) =>
    new Promise<void>((resolve, reject) => {
      const [metadata, options] = internals.callArguments({ requiresLeader: false });
      const call = (grpcClient as unknown as streamsGrpc.StreamsClient).append(metadata, options, (error, response) => {
        if (error) return reject(commandErrors.convertToCommandError(error));
        // Expected state `any` is never wrong; an answer without success is not an append.
        if (!response?.hasSuccess()) return reject(new Error(`append to ${stream}: the server answered without success`));
        resolve();
      });
      call.on('error', () => undefined); // the callback above reports it
      const [header, entry] = appendMessages(stream, type, dataJson);
      call.write(header);
      call.write(entry);
      call.end();
    }),
  );
}

/** Appends JSON events one at a time, each to its stream with expected state `any`. */
export interface JsonAppender {
  /** Resolves once the event is durable; errors are the client's (`UnavailableError`, …). */
  append(stream: string, type: string, data: unknown): Promise<void>;
  /** Events answered on the hand-framed connection. */
  readonly framedAppends: number;
  close(): void;
}

/**
 * The snapshot progress records' path: on a server with the v2 AppendSession, each event is one
 * request on a hand-framed HTTP/2 connection of its own (h2-append.ts, the sink's path for
 * appends) — the record as the sink encodes one (JSON data, the type as the schema name, no
 * properties, a random id); else `appendJsonEvent`.
 * Why: a progress record is saved per snapshot chunk, and through grpc-js a save cost ≈ 1.3 ms
 * of the main thread (a CPU profile of the initial snapshot: its call set-up, credentials
 * metadata, filters and google-protobuf, ≈ 8 % of the snapshot's main thread).
 * `connectionString` gives the transport (plain text or TLS, h2-transport.ts).
 */
export function createJsonAppender(client: KurrentDBClient, connectionString: string): JsonAppender {
  /** The framed transport, null for the grpc-js path; not settled until the server's features are known. */
  let transport: Promise<H2AppendTransport | null> | null = null;
  let closed = false;
  let framed: H2AppendTransport | null = null;
  const decide = async (): Promise<H2AppendTransport | null> => {
    if ((await serverSupportsMultiStreamAppend(client)) !== true || closed) return null;
    return (framed = createH2AppendTransport(client, { transport: transportOf(connectionString) }));
  };
  return {
    async append(stream, type, data) {
      if (!transport) {
        const deciding = decide();
        transport = deciding;
        // A failed detection (the server unreachable) is asked again on the next append.
        deciding.catch(() => {
          if (transport === deciding) transport = null;
        });
      }
      const h2 = await transport;
      if (!h2 || closed) return appendJsonEvent(client, stream, type, data);
      const { record } = encodeAppendRecordSized(randomUUID(), type, JSON.stringify(data), {});
      const result = await h2.append([{ streamName: stream, expectedState: 'any', records: [record] }]);
      if (result.responses.length !== 1 || result.responses[0]!.streamName !== stream) throw new Error(`append to ${stream}: the server answered for other streams`);
    },
    get framedAppends() {
      return framed?.framedAppends ?? 0;
    },
    close() {
      closed = true;
      void transport?.then((h2) => h2?.close()).catch(() => undefined);
    },
  };
}
