// gRPC errors exactly as KurrentDB raises them, so the client maps them to the same error classes.
//   v1 (Streams.*): status code + `exception` trailer (Services/Transport/Grpc/RpcExceptions.cs);
//                   BatchAppend answers with a google.rpc.Status inside the response (Status.cs).
//   v2 (StreamsService): status code + `grpc-status-details-bin` carrying a google.rpc.Status whose
//                   details hold the typed error (KurrentDB.Api.V2 ApiErrors.cs, errors.proto codes).
import * as grpc from '@grpc/grpc-js';
import { packAny, sharedPb, statusPb, v2ErrorsPb } from './proto.js';
import { ExpectedVersion } from './store.js';

export type RpcError = grpc.ServerErrorResponse;

export function rpcError(code: grpc.status, details: string, trailers: Record<string, string | Buffer> = {}): RpcError {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(trailers)) metadata.set(key, value);
  return Object.assign(new Error(details), { code, details, metadata });
}

/** RpcExceptions.StreamDeleted */
export function streamDeletedError(streamName: string): RpcError {
  return rpcError(grpc.status.FAILED_PRECONDITION, `Event stream '${streamName}' is deleted.`, {
    exception: 'stream-deleted',
    'stream-name': streamName,
  });
}

/** RpcExceptions.MaxAppendSizeExceeded */
export function maxAppendSizeExceededError(maxAppendSize: number): RpcError {
  return rpcError(grpc.status.INVALID_ARGUMENT, `Maximum Append Size of ${maxAppendSize} Exceeded.`, {
    exception: 'maximum-append-size-exceeded',
    'maximum-append-size': String(maxAppendSize),
  });
}

/** RpcExceptions.WrongExpectedVersion (used by Delete/Tombstone; Append answers with a message instead). */
export function wrongExpectedVersionError(operation: string, streamName: string, expected: bigint, actual: bigint): RpcError {
  return rpcError(
    grpc.status.FAILED_PRECONDITION,
    `${operation} failed due to WrongExpectedVersion. Stream: ${streamName}, Expected version: ${expected}, Actual version: ${actual}`,
    {
      exception: 'wrong-expected-version',
      'stream-name': streamName,
      'expected-version': expected.toString(),
      // Delete/Tombstone pass DeleteStreamCompleted.CurrentVersion, a non-nullable long (-1 for a
      // missing stream), so the trailer is the plain number; only a null actual version is empty.
      'actual-version': actual.toString(),
    },
  );
}

/** What `failNextAppends` injects: a dropped/broken server, before anything is written. */
export function injectedFailure(kind: 'unavailable' | 'internal' | 'unimplemented'): RpcError {
  if (kind === 'unavailable') return rpcError(grpc.status.UNAVAILABLE, 'Server Is Not Ready (injected by the in-memory KurrentDB)');
  if (kind === 'unimplemented') return rpcError(grpc.status.UNIMPLEMENTED, 'Method not implemented (injected by the in-memory KurrentDB)');
  return rpcError(grpc.status.INTERNAL, 'Internal error (injected by the in-memory KurrentDB)');
}

// ---- BatchAppend: google.rpc.Status inside BatchAppendResp (Status.cs) ----

type Packable = { serializeBinary(): Uint8Array };

function status(code: grpc.status, message: string, details: Packable, typeName: string): statusPb.Status {
  const result = new statusPb.Status();
  result.setCode(code as number);
  result.setMessage(message);
  result.setDetails(packAny(details, typeName));
  return result;
}

/** Status.WrongExpectedVersion: code AlreadyExists, details `event_store.client.WrongExpectedVersion`. */
export function wrongExpectedVersionStatus(expected: bigint, current: bigint): statusPb.Status {
  const details = new sharedPb.WrongExpectedVersion();
  if (current < 0n) details.setCurrentNoStream(new sharedPb.Empty());
  else details.setCurrentStreamRevision(current.toString());
  if (expected === ExpectedVersion.Any) details.setExpectedAny(new sharedPb.Empty());
  else if (expected === ExpectedVersion.NoStream) details.setExpectedNoStream(new sharedPb.Empty());
  else if (expected === ExpectedVersion.StreamExists) details.setExpectedStreamExists(new sharedPb.Empty());
  else details.setExpectedStreamPosition(expected.toString());
  return status(grpc.status.ALREADY_EXISTS, 'WrongExpectedVersion', details, 'event_store.client.WrongExpectedVersion');
}

/** Status.StreamDeleted: code NotFound. */
export function streamDeletedStatus(streamName: string): statusPb.Status {
  const details = new sharedPb.StreamDeleted();
  details.setStreamIdentifier(streamIdentifier(streamName));
  return status(grpc.status.NOT_FOUND, 'StreamDeleted', details, 'event_store.client.StreamDeleted');
}

/** Status.MaximumAppendSizeExceeded: code InvalidArgument. */
export function maxAppendSizeExceededStatus(maxAppendSize: number): statusPb.Status {
  const details = new sharedPb.MaximumAppendSizeExceeded();
  details.setMaxappendsize(maxAppendSize);
  return status(grpc.status.INVALID_ARGUMENT, 'MaximumAppendSizeExceeded', details, 'event_store.client.MaximumAppendSizeExceeded');
}

export function streamIdentifier(streamName: string): sharedPb.StreamIdentifier {
  const identifier = new sharedPb.StreamIdentifier();
  identifier.setStreamName(Buffer.from(streamName, 'utf8'));
  return identifier;
}

// ---- v2 StreamsService errors (errors.proto: status code per StreamsError) ----

const V2_ERRORS = 'kurrentdb.protocol.v2.streams.errors';

function v2Error(code: grpc.status, message: string, details: Packable, detailsType: string): RpcError {
  // The server sends [ErrorInfo, details]; the client reads the details (the last Any).
  const body = status(code, message, details, `${V2_ERRORS}.${detailsType}`);
  return rpcError(code, message, { 'grpc-status-details-bin': Buffer.from(body.serializeBinary()) });
}

/** STREAMS_ERROR_STREAM_REVISION_CONFLICT (FAILED_PRECONDITION). */
export function streamRevisionConflictError(streamName: string, expected: bigint, actual: bigint): RpcError {
  const details = new v2ErrorsPb.StreamRevisionConflictErrorDetails();
  details.setStream(streamName);
  details.setExpectedRevision(expected.toString());
  details.setActualRevision(actual.toString());
  return v2Error(
    grpc.status.FAILED_PRECONDITION,
    `Append failed due to a revision conflict on stream '${streamName}'. Expected revision: ${expected}. Actual revision: ${actual}.`,
    details,
    'StreamRevisionConflictErrorDetails',
  );
}

/** STREAMS_ERROR_STREAM_TOMBSTONED (FAILED_PRECONDITION). */
export function streamTombstonedError(streamName: string): RpcError {
  const details = new v2ErrorsPb.StreamTombstonedErrorDetails();
  details.setStream(streamName);
  return v2Error(
    grpc.status.FAILED_PRECONDITION,
    `Stream '${streamName}' has been tombstoned. It has been permanently removed from the system and cannot be restored.`,
    details,
    'StreamTombstonedErrorDetails',
  );
}

/** STREAMS_ERROR_APPEND_TRANSACTION_SIZE_EXCEEDED (ABORTED). */
export function appendTransactionSizeExceededError(records: number, size: number, maxSize: number): RpcError {
  const details = new v2ErrorsPb.AppendTransactionSizeExceededErrorDetails();
  details.setSize(size);
  details.setMaxSize(maxSize);
  return v2Error(
    grpc.status.ABORTED,
    `Transaction size (${size} bytes) exceeded the maximum allowed size of ${maxSize} bytes after ${records} record(s).`,
    details,
    'AppendTransactionSizeExceededErrorDetails',
  );
}

/** STREAMS_ERROR_APPEND_RECORD_SIZE_EXCEEDED (INVALID_ARGUMENT). */
export function appendRecordSizeExceededError(streamName: string, recordId: string, size: number, maxSize: number): RpcError {
  const details = new v2ErrorsPb.AppendRecordSizeExceededErrorDetails();
  details.setStream(streamName);
  details.setRecordId(recordId);
  details.setSize(size);
  details.setMaxSize(maxSize);
  return v2Error(
    grpc.status.INVALID_ARGUMENT,
    `The size of record ${recordId} (${size} bytes) exceeds the maximum allowed size of ${maxSize} bytes.`,
    details,
    'AppendRecordSizeExceededErrorDetails',
  );
}

/** STREAMS_ERROR_STREAM_ALREADY_IN_APPEND_SESSION (ABORTED). */
export function streamAlreadyInAppendSessionError(streamName: string): RpcError {
  const details = new v2ErrorsPb.StreamAlreadyInAppendSessionErrorDetails();
  details.setStream(streamName);
  return v2Error(
    grpc.status.ABORTED,
    `Stream '${streamName}' already has a different group of messages in this session. ` +
      'Appends for the same stream must currently be grouped together and not interleaved with appends for other streams.',
    details,
    'StreamAlreadyInAppendSessionErrorDetails',
  );
}

/** STREAMS_ERROR_APPEND_SESSION_NO_REQUESTS (FAILED_PRECONDITION). */
export function appendSessionNoRequestsError(): RpcError {
  return rpcError(grpc.status.FAILED_PRECONDITION, 'Append session started, but no append requests were sent before ending the session.');
}
