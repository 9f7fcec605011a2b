// The v2 `kurrentdb.protocol.v2.streams.StreamsService`: AppendSession, KurrentDB 25.1's atomic
// multi-stream append (the client's `multiStreamAppend`). Source: KurrentDB.Api.V2 Modules/Streams
// (StreamsService.AppendSessionCommand, AppendRecordExtensions, ApiErrors), and
// KurrentDB.Core/Data/EventRecord.cs for how record properties read back as event metadata.
import { randomUUID } from 'node:crypto';
import type http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import type { ServerContext } from './context.js';
import {
  appendRecordSizeExceededError,
  appendSessionNoRequestsError,
  appendTransactionSizeExceededError,
  streamAlreadyInAppendSessionError,
  streamRevisionConflictError,
  streamTombstonedError,
} from './errors.js';
import { answerError as h2AnswerError, answerMessages, statusError } from './h2-answer.js';
import { v2StreamsPb } from './proto.js';
import { encodeAppendSessionResponse, type AppendOutput } from './v2-append-response.js';
import type { AppendRequest, ProposedEvent } from './store.js';
import { decodeAppendRequest, type DecodedAppendRecord, type DecodedAppendRequest } from './v2-append-decoder.js';
import { ExpectedVersion } from './store.js';

const { SchemaFormat } = v2StreamsPb;

/** The C# enum names the server writes into `$schema.format` (SchemaFormat.ToString()). */
const FORMAT_NAMES: Record<number, string> = {
  [SchemaFormat.SCHEMA_FORMAT_JSON]: 'Json',
  [SchemaFormat.SCHEMA_FORMAT_PROTOBUF]: 'Protobuf',
  [SchemaFormat.SCHEMA_FORMAT_AVRO]: 'Avro',
  [SchemaFormat.SCHEMA_FORMAT_BYTES]: 'Bytes',
};

/**
 * `"$schema.name":<type>,"$schema.format":<format>}` as bytes, per format and type (a few per
 * workload): what the server adds after a record's properties in the event's metadata JSON.
 */
const schemaTails = new Map<number, Map<string, Buffer>>();
let schemaTailCount = 0;
export function metadataTail(format: number, type: string): Buffer {
  // By format, then type: no key string made per record.
  let byType = schemaTails.get(format);
  let tail = byType?.get(type);
  if (!tail) {
    const formatName = FORMAT_NAMES[format] ?? String(format);
    tail = Buffer.from(`"$schema.name":${JSON.stringify(type)},"$schema.format":${JSON.stringify(formatName)}}`, 'utf8');
    if (schemaTailCount < 1024) {
      if (!byType) schemaTails.set(format, (byType = new Map()));
      byType.set(type, tail);
      schemaTailCount += 1;
    }
  }
  return tail;
}

/**
 * A record becomes an event whose metadata is its properties (stored as a protobuf Struct and
 * rendered as JSON on read), plus `$schema.name` (the event type) and `$schema.format`
 * (EventRecord.SynthesizeMetadataFromProperties; non-JSON formats get `$schema.format` already in
 * PreProcessRecord). Readers of such events therefore see two extra metadata keys.
 */
export function toProposedEvent(record: DecodedAppendRecord): { event: ProposedEvent; propertiesSize: number } {
  const format = record.schema?.format ?? SchemaFormat.SCHEMA_FORMAT_UNSPECIFIED;
  const type = record.schema?.name ?? '';
  const formatName = FORMAT_NAMES[format] ?? String(format);
  let metadata: Buffer;
  if (record.metadataJson) {
    metadata = record.metadataJson; // made by the decoder with `metadataTail`, the same bytes
  } else if (!Object.prototype.hasOwnProperty.call(record.properties, '$schema.name') && !Object.prototype.hasOwnProperty.call(record.properties, '$schema.format')) {
    // Appending the two keys to the serialized properties gives the same JSON as adding them to a copy.
    const own = JSON.stringify(record.properties);
    metadata = Buffer.from(`${own.length > 2 ? `${own.slice(0, -1)},` : '{'}"$schema.name":${JSON.stringify(type)},"$schema.format":${JSON.stringify(formatName)}}`, 'utf8');
  } else {
    const properties: Record<string, unknown> = { ...record.properties };
    properties['$schema.name'] = type;
    properties['$schema.format'] = formatName;
    metadata = Buffer.from(JSON.stringify(properties), 'utf8');
  }
  return {
    event: {
      id: (record.id ?? randomUUID()).toLowerCase(), // PreProcessRecord fills a missing id
      type,
      contentType: format === SchemaFormat.SCHEMA_FORMAT_JSON ? 'application/json' : 'application/octet-stream',
      data: record.data,
      metadata,
    },
    propertiesSize: metadata.length,
  };
}

/**
 * One AppendSession: requests are added as they arrive (each checked at once, like the server's
 * command), then `finish` applies them atomically. Shared by the grpc-js handler and the raw
 * HTTP/2 one below.
 */
interface AppendSessionRun {
  /** Null when accepted; the error that ends the session otherwise. */
  add(request: DecodedAppendRequest): grpc.ServerErrorResponse | null;
  /** The AppendSessionResponse, encoded (v2-append-response.ts). */
  finish(): Promise<Buffer>;
}

function startAppendSession(context: ServerContext): AppendSessionRun {
  const { store } = context;
  const requests: AppendRequest[] = [];
  const seen = new Set<string>();
  let totalSize = 0;
  let eventCount = 0;
  return {
    add(request) {
      const streamName = request.stream;
      // "Temporary limitation": each stream at most once per session, compared case-insensitively
      // (AppendRequestComparer uses OrdinalIgnoreCase).
      const key = streamName.toLowerCase();
      if (seen.has(key)) return streamAlreadyInAppendSessionError(streamName);
      seen.add(key);

      const events: ProposedEvent[] = [];
      for (const record of request.records) {
        const { event, propertiesSize } = toProposedEvent(record);
        // AppendRecordExtensions.CalculateSizeOnDisk: data + properties + schema name.
        const recordSize = event.data.length + propertiesSize + Buffer.byteLength(event.type);
        if (recordSize > context.maxAppendEventSize) {
          return appendRecordSizeExceededError(streamName, event.id, recordSize, context.maxAppendEventSize);
        }
        totalSize += recordSize;
        eventCount += 1;
        if (totalSize > context.maxAppendSize) {
          return appendTransactionSizeExceededError(eventCount, totalSize, context.maxAppendSize);
        }
        events.push(event);
      }
      // No expected revision means "any" (ExpectedRevisionOrAny).
      const expected = request.expectedRevision ?? ExpectedVersion.Any;
      requests.push({ streamName, expectedRevision: expected, events });
      return null;
    },
    async finish() {
      if (requests.length === 0) throw appendSessionNoRequestsError();
      const result = await context.applyWrite(() => store.append(requests), requests.map((r) => r.streamName));
      if (!result.ok) {
        // AppendSessionCommand.MapToError names the first consistency failure only: StreamDeleted
        // (for the whole write) becomes StreamTombstoned, WrongExpectedVersion a revision conflict.
        const first = result.streams[0]!;
        if (result.failure === 'stream_deleted') throw streamTombstonedError(first.streamName);
        const actual = first.kind === 'wrong_expected_version' ? first.currentRevision : -1n;
        const expected = requests.find((r) => r.streamName === first.streamName)?.expectedRevision ?? ExpectedVersion.Any;
        throw streamRevisionConflictError(first.streamName, expected, actual);
      }
      const outputs: AppendOutput[] = [];
      for (const stream of result.streams) if (stream.kind === 'ok') outputs.push({ streamName: stream.streamName, revision: stream.currentRevision });
      return encodeAppendSessionResponse(outputs, result.position ?? -1n);
    },
  };
}

export function createStreamsV2Service(context: ServerContext): grpc.UntypedServiceImplementation {
  function appendSession(
    call: grpc.ServerReadableStream<DecodedAppendRequest, Buffer>,
    callback: grpc.sendUnaryData<Buffer>,
  ): void {
    const run = startAppendSession(context);
    let failed = false;
    const fail = (error: grpc.ServerErrorResponse) => {
      if (failed) return;
      failed = true;
      callback(error);
    };
    call.on('data', (request: DecodedAppendRequest) => {
      if (failed) return;
      const error = run.add(request);
      if (error) fail(error);
    });
    call.on('error', () => {
      failed = true;
    });
    call.on('end', () => {
      if (failed) return;
      run.finish().then((response) => callback(null, response), (error: grpc.ServerErrorResponse) => fail(error));
    });
  }

  return { appendSession };
}

/** The HTTP/2 path of AppendSession. */
export const APPEND_SESSION_PATH = '/kurrentdb.protocol.v2.streams.StreamsService/AppendSession';

/**
 * AppendSession served straight off the HTTP/2 stream: gRPC frames parsed as they arrive, the
 * answer written as one DATA frame and trailers (or trailers only, for an error). grpc-js's
 * server handles each message of a client stream through several promise and stream hops —
 * about 0.1 ms of CPU per message here, and a multi-stream append is one message per stream.
 * Same checks, same errors, same write path (latency, fault injection) as the grpc-js handler.
 */
export function serveAppendSession(context: ServerContext, stream: http2.ServerHttp2Stream): void {
  const run = startAppendSession(context);
  let pending: Buffer = Buffer.alloc(0);
  let answered = false;
  const answerError = (error: grpc.ServerErrorResponse): void => {
    if (answered) return;
    answered = true;
    h2AnswerError(stream, error);
  };
  const answer = (response: Buffer): void => {
    if (answered) return;
    answered = true;
    answerMessages(stream, [response]);
  };
  stream.on('error', () => {
    answered = true; // the connection is gone: nobody to answer
  });
  /** Chunks received and not yet joined (joined once a whole message is there: large records arrive in many chunks). */
  const chunks: Buffer[] = [];
  let buffered = 0;
  /** Bytes the next message needs (header + body), once its header is known. */
  let needed = 5;
  /** Parses every whole message received so far; notes how many more bytes the next one needs. */
  const parse = (): void => {
    pending = chunks.length === 1 && pending.length === 0 ? chunks[0]! : Buffer.concat([pending, ...chunks]);
    chunks.length = 0;
    buffered = 0;
    for (;;) {
      if (pending.length < 5) {
        needed = 5 - pending.length;
        return;
      }
      if (pending[0] !== 0) return answerError(statusError(grpc.status.UNIMPLEMENTED, 'compressed messages are not served'));
      const length = pending.readUInt32BE(1);
      if (pending.length < 5 + length) {
        needed = 5 + length - pending.length;
        return;
      }
      const bytes = pending.subarray(5, 5 + length);
      pending = pending.subarray(5 + length);
      let request: DecodedAppendRequest;
      try {
        request = decodeAppendRequest(bytes, metadataTail);
      } catch (error) {
        return answerError(statusError(grpc.status.INTERNAL, `could not decode AppendRequest: ${(error as Error).message}`));
      }
      const error = run.add(request);
      if (error) return answerError(error);
    }
  };
  stream.on('data', (chunk: Buffer) => {
    if (answered) return;
    chunks.push(chunk);
    buffered += chunk.length;
    if (buffered >= needed) parse();
  });
  stream.on('end', () => {
    if (answered) return;
    if (buffered > 0) parse();
    if (answered) return;
    if (pending.length > 0) {
      return answerError(statusError(grpc.status.INTERNAL, `the request ended inside a message (${pending.length} bytes left)`));
    }
    run.finish().then(answer, (error: grpc.ServerErrorResponse) => answerError(error));
  });
}

/**
 * The v2 service definition with AppendSession's requests decoded by `decodeAppendRequest`
 * (no google-protobuf objects per record) and its answers encoded by hand (v2-append-response.ts).
 */
export function streamsV2ServiceDefinition(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const appendSession = definition['appendSession'];
  if (!appendSession) throw new Error('the v2 StreamsService definition has no appendSession');
  return {
    ...definition,
    appendSession: {
      ...appendSession,
      requestDeserialize: (bytes: Buffer) => decodeAppendRequest(bytes, metadataTail),
      // Answers are encoded by hand (encodeAppendSessionResponse).
      responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : appendSession.responseSerialize(value)),
    },
  };
}
