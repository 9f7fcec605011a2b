// The v2 `kurrentdb.protocol.v2.streams.StreamsService`: AppendSession, KurrentDB 25.1's atomic
// multi-stream append (the client's `multiStreamAppend`). Source: KurrentDB.Api.V2 Modules/Streams
// (StreamsService.AppendSessionCommand, AppendRecordExtensions, ApiErrors), and
// KurrentDB.Core/Data/EventRecord.cs for how record properties read back as event metadata.
import { randomUUID } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import type { ServerContext } from './context.js';
import {
  appendRecordSizeExceededError,
  appendSessionNoRequestsError,
  appendTransactionSizeExceededError,
  streamAlreadyInAppendSessionError,
  streamRevisionConflictError,
  streamTombstonedError,
} from './errors.js';
import { v2StreamsPb } from './proto.js';
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
 * A record becomes an event whose metadata is its properties (stored as a protobuf Struct and
 * rendered as JSON on read), plus `$schema.name` (the event type) and `$schema.format`
 * (EventRecord.SynthesizeMetadataFromProperties; non-JSON formats get `$schema.format` already in
 * PreProcessRecord). Readers of such events therefore see two extra metadata keys.
 */
function toProposedEvent(record: DecodedAppendRecord): { event: ProposedEvent; propertiesSize: number } {
  const format = record.schema?.format ?? SchemaFormat.SCHEMA_FORMAT_UNSPECIFIED;
  const type = record.schema?.name ?? '';
  const properties: Record<string, unknown> = { ...record.properties };
  properties['$schema.name'] = type;
  properties['$schema.format'] = FORMAT_NAMES[format] ?? String(format);
  const metadata = Buffer.from(JSON.stringify(properties), 'utf8');
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

export function createStreamsV2Service(context: ServerContext): grpc.UntypedServiceImplementation {
  const { store } = context;

  function appendSession(
    call: grpc.ServerReadableStream<DecodedAppendRequest, v2StreamsPb.AppendSessionResponse>,
    callback: grpc.sendUnaryData<v2StreamsPb.AppendSessionResponse>,
  ): void {
    const requests: AppendRequest[] = [];
    const seen = new Set<string>();
    let totalSize = 0;
    let eventCount = 0;
    let failed = false;
    const fail = (error: grpc.ServerErrorResponse) => {
      if (failed) return;
      failed = true;
      callback(error);
    };

    call.on('data', (request: DecodedAppendRequest) => {
      if (failed) return;
      const streamName = request.stream;
      // "Temporary limitation": each stream at most once per session, compared case-insensitively
      // (AppendRequestComparer uses OrdinalIgnoreCase).
      const key = streamName.toLowerCase();
      if (seen.has(key)) return fail(streamAlreadyInAppendSessionError(streamName));
      seen.add(key);

      const events: ProposedEvent[] = [];
      for (const record of request.records) {
        const { event, propertiesSize } = toProposedEvent(record);
        // AppendRecordExtensions.CalculateSizeOnDisk: data + properties + schema name.
        const recordSize = event.data.length + propertiesSize + Buffer.byteLength(event.type);
        if (recordSize > context.maxAppendEventSize) {
          return fail(appendRecordSizeExceededError(streamName, event.id, recordSize, context.maxAppendEventSize));
        }
        totalSize += recordSize;
        eventCount += 1;
        if (totalSize > context.maxAppendSize) {
          return fail(appendTransactionSizeExceededError(eventCount, totalSize, context.maxAppendSize));
        }
        events.push(event);
      }
      // No expected revision means "any" (ExpectedRevisionOrAny).
      const expected = request.expectedRevision ?? ExpectedVersion.Any;
      requests.push({ streamName, expectedRevision: expected, events });
    });
    call.on('error', () => {
      failed = true;
    });
    call.on('end', () => {
      if (failed) return;
      if (requests.length === 0) return fail(appendSessionNoRequestsError());
      context
        .applyWrite(() => store.append(requests), requests.map((r) => r.streamName))
        .then((result) => {
          if (!result.ok) {
            // AppendSessionCommand.MapToError names the first consistency failure only: StreamDeleted
            // (for the whole write) becomes StreamTombstoned, WrongExpectedVersion a revision conflict.
            const first = result.streams[0]!;
            if (result.failure === 'stream_deleted') return fail(streamTombstonedError(first.streamName));
            const actual = first.kind === 'wrong_expected_version' ? first.currentRevision : -1n;
            const expected = requests.find((r) => r.streamName === first.streamName)?.expectedRevision ?? ExpectedVersion.Any;
            return fail(streamRevisionConflictError(first.streamName, expected, actual));
          }
          const response = new v2StreamsPb.AppendSessionResponse();
          for (const stream of result.streams) {
            if (stream.kind !== 'ok') continue;
            const output = new v2StreamsPb.AppendResponse();
            output.setStream(stream.streamName);
            output.setStreamRevision(stream.currentRevision.toString());
            response.addOutput(output);
          }
          response.setPosition((result.position ?? -1n).toString());
          callback(null, response);
        })
        .catch((error: grpc.ServerErrorResponse) => fail(error));
    });
  }

  return { appendSession };
}

/**
 * The v2 service definition with AppendSession's requests decoded by `decodeAppendRequest`
 * (no google-protobuf objects per record); responses are the generated classes.
 */
export function streamsV2ServiceDefinition(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const appendSession = definition['appendSession'];
  if (!appendSession) throw new Error('the v2 StreamsService definition has no appendSession');
  return { ...definition, appendSession: { ...appendSession, requestDeserialize: (bytes: Buffer) => decodeAppendRequest(bytes) } };
}
