// The messages of Streams.Read as the server writes them: recorded events (ResponseConverter.
// ConvertToReadEvent), StreamNotFound, and a subscription's Confirmation, CaughtUp and Checkpoint.
// Builders only; the read and subscription handlers decide what to send when.
import { randomUUID } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import { sharedPb, streamsPb, timestampPb } from './proto.js';
import type { StreamReadRequest } from './read-codec.js';
import type { RecordedEvent } from './store-types.js';

/**
 * A Streams.Read call: its request decoded by google-protobuf, or by hand for a plain stream
 * read; its responses google-protobuf messages, or bytes encoded by hand (read-codec.ts).
 */
export type ReadCall = grpc.ServerWritableStream<streamsPb.ReadReq | StreamReadRequest, streamsPb.ReadResp | Buffer>;

/**
 * What a catch-up subscription needs of its call: a grpc-js ReadCall, or the raw HTTP/2 one
 * (h2-subscription-call.ts). Emitting 'error' ends the call with that error's status.
 */
export interface SubscriptionCall {
  write(message: streamsPb.ReadResp | Buffer): boolean;
  emit(event: 'error', error: grpc.ServerErrorResponse): boolean;
  on(event: 'cancelled' | 'close' | 'error', listener: () => void): unknown;
}

export interface EncodeOptions {
  /** UUIDOption: the client asks for ids as strings or as two int64s. */
  readonly uuidAsString: boolean;
}

export function encodeUuid(id: string, options: EncodeOptions): sharedPb.UUID {
  const uuid = new sharedPb.UUID();
  if (options.uuidAsString) {
    uuid.setString(id);
    return uuid;
  }
  const hex = id.replace(/-/g, '');
  const structured = new sharedPb.UUID.Structured();
  structured.setMostSignificantBits(BigInt.asIntN(64, BigInt(`0x${hex.slice(0, 16)}`)).toString());
  structured.setLeastSignificantBits(BigInt.asIntN(64, BigInt(`0x${hex.slice(16)}`)).toString());
  uuid.setStructured(structured);
  return uuid;
}

/** The stream name of a read's stream options (UTF-8 bytes on the wire). */
export function streamNameOf(options: streamsPb.ReadReq.Options): string {
  return Buffer.from(options.getStream()?.getStreamIdentifier()?.getStreamName_asU8() ?? new Uint8Array()).toString('utf8');
}

/** ResponseConverter.ConvertToReadEvent: `type`, `content-type` and `created` travel as gRPC metadata. */
export function toReadResp(event: RecordedEvent, options: EncodeOptions): streamsPb.ReadResp {
  const recorded = new streamsPb.ReadResp.ReadEvent.RecordedEvent();
  recorded.setId(encodeUuid(event.id, options));
  const identifier = new sharedPb.StreamIdentifier();
  identifier.setStreamName(Buffer.from(event.streamName, 'utf8'));
  recorded.setStreamIdentifier(identifier);
  recorded.setStreamRevision(event.revision.toString());
  recorded.setCommitPosition(event.position.toString());
  recorded.setPreparePosition(event.position.toString());
  recorded.getMetadataMap().set('type', event.type);
  recorded.getMetadataMap().set('content-type', event.contentType);
  recorded.getMetadataMap().set('created', event.created.toString());
  recorded.setData(event.data);
  recorded.setCustomMetadata(event.metadata);

  const readEvent = new streamsPb.ReadResp.ReadEvent();
  readEvent.setEvent(recorded);
  readEvent.setCommitPosition(event.position.toString());
  const response = new streamsPb.ReadResp();
  response.setEvent(readEvent);
  return response;
}

export function streamNotFound(streamName: string): streamsPb.ReadResp {
  const notFound = new streamsPb.ReadResp.StreamNotFound();
  const identifier = new sharedPb.StreamIdentifier();
  identifier.setStreamName(Buffer.from(streamName, 'utf8'));
  notFound.setStreamIdentifier(identifier);
  const response = new streamsPb.ReadResp();
  response.setStreamNotFound(notFound);
  return response;
}

export function lastStreamPosition(revision: bigint): streamsPb.ReadResp {
  const response = new streamsPb.ReadResp();
  response.setLastStreamPosition(revision.toString());
  return response;
}

function now(): timestampPb.Timestamp {
  return timestampPb.Timestamp.fromDate(new Date());
}

/** A subscription's first message, with a fresh subscription id. */
export function confirmation(): streamsPb.ReadResp {
  const message = new streamsPb.ReadResp.SubscriptionConfirmation();
  message.setSubscriptionId(randomUUID());
  const response = new streamsPb.ReadResp();
  response.setConfirmation(message);
  return response;
}

/** The end of a subscription's catch-up: the stream revision or the log position reached. */
export function caughtUp(at: { revision?: bigint; position?: bigint }): streamsPb.ReadResp {
  const message = new streamsPb.ReadResp.CaughtUp();
  message.setTimestamp(now());
  if (at.revision !== undefined && at.revision >= 0n) message.setStreamRevision(at.revision.toString());
  if (at.position !== undefined) {
    const position = new streamsPb.ReadResp.Position();
    position.setCommitPosition(at.position.toString());
    position.setPreparePosition(at.position.toString());
    message.setPosition(position);
  }
  const response = new streamsPb.ReadResp();
  response.setCaughtUp(message);
  return response;
}

/** A filtered $all subscription's checkpoint at a log position. */
export function checkpoint(position: bigint): streamsPb.ReadResp {
  const message = new streamsPb.ReadResp.Checkpoint();
  message.setCommitPosition(position.toString());
  message.setPreparePosition(position.toString());
  message.setTimestamp(now());
  const response = new streamsPb.ReadResp();
  response.setCheckpoint(message);
  return response;
}
