// Decoding the v1 Streams messages the client sends: UUIDs (as text or as two int64 halves),
// stream identifiers, proposed events, and the expected revision of an append, batch or delete.
import { ExpectedVersion } from './check-commit.js';
import { sharedPb, streamsPb } from './proto.js';
import type { ProposedEvent } from './store-types.js';

/** A UUID as the client sends it: `string`, or `structured` (two signed int64 halves). */
export function decodeUuid(uuid: sharedPb.UUID | undefined): string {
  if (!uuid) return '';
  if (uuid.hasString()) return uuid.getString();
  const structured = uuid.getStructured();
  if (!structured) return '';
  const hex = (bits: string) => BigInt.asUintN(64, BigInt(bits)).toString(16).padStart(16, '0');
  const all = hex(structured.getMostSignificantBits()) + hex(structured.getLeastSignificantBits());
  return `${all.slice(0, 8)}-${all.slice(8, 12)}-${all.slice(12, 16)}-${all.slice(16, 20)}-${all.slice(20)}`;
}

export function decodeStreamName(identifier: sharedPb.StreamIdentifier | undefined): string {
  return Buffer.from(identifier?.getStreamName_asU8() ?? new Uint8Array()).toString('utf8');
}

/** A v1 ProposedMessage: type and content type travel as metadata entries (Constants.Metadata). */
export function toProposedEvent(message: streamsPb.AppendReq.ProposedMessage | streamsPb.BatchAppendReq.ProposedMessage): ProposedEvent {
  const metadata = message.getMetadataMap();
  return {
    id: decodeUuid(message.getId()).toLowerCase(), // the server parses ids as Guids and prints them lower-case
    type: metadata.get('type') ?? '',
    contentType: metadata.get('content-type') ?? 'application/octet-stream',
    data: message.getData_asU8(),
    metadata: message.getCustomMetadata_asU8(),
  };
}

/** The target of a write: a stream and the expected revision (an ExpectedVersion constant or a revision). */
export interface WriteTarget {
  readonly streamName: string;
  readonly expected: bigint;
}

/** Streams.Append: the options message that precedes the events. */
export function appendTarget(options: streamsPb.AppendReq.Options): WriteTarget {
  const streamName = decodeStreamName(options.getStreamIdentifier());
  const Case = streamsPb.AppendReq.Options.ExpectedStreamRevisionCase;
  switch (options.getExpectedStreamRevisionCase()) {
    case Case.REVISION:
      return { streamName, expected: BigInt(options.getRevision()) };
    case Case.NO_STREAM:
      return { streamName, expected: ExpectedVersion.NoStream };
    case Case.STREAM_EXISTS:
      return { streamName, expected: ExpectedVersion.StreamExists };
    default:
      return { streamName, expected: ExpectedVersion.Any };
  }
}

/** Streams.BatchAppend: the options of a batch's first chunk (absent: an empty stream name, any). */
export function batchTarget(options: streamsPb.BatchAppendReq.Options | undefined): WriteTarget {
  const Case = streamsPb.BatchAppendReq.Options.ExpectedStreamPositionCase;
  const streamName = decodeStreamName(options?.getStreamIdentifier());
  switch (options?.getExpectedStreamPositionCase()) {
    case Case.STREAM_POSITION:
      return { streamName, expected: BigInt(options.getStreamPosition()) };
    case Case.NO_STREAM:
      return { streamName, expected: ExpectedVersion.NoStream };
    case Case.STREAM_EXISTS:
      return { streamName, expected: ExpectedVersion.StreamExists };
    default:
      return { streamName, expected: ExpectedVersion.Any };
  }
}

/** Streams.Delete and Streams.Tombstone share the shape of their options. */
export function deleteTarget(request: streamsPb.DeleteReq | streamsPb.TombstoneReq): WriteTarget {
  const options = request.getOptions();
  const streamName = decodeStreamName(options?.getStreamIdentifier());
  if (!options) return { streamName, expected: ExpectedVersion.Any };
  if (options.hasRevision()) return { streamName, expected: BigInt(options.getRevision()) };
  if (options.hasNoStream()) return { streamName, expected: ExpectedVersion.NoStream };
  if (options.hasStreamExists()) return { streamName, expected: ExpectedVersion.StreamExists };
  return { streamName, expected: ExpectedVersion.Any };
}
