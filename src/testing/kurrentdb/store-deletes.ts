// Deleting streams, and undoing a soft delete, as KurrentDB's StorageWriterService does:
//   - soft delete (WriteDelete, hardDelete = false): `{"$tb": EventNumber.DeletedStream}` in the metastream;
//   - tombstone (WriteDelete, hardDelete = true): a `$streamDeleted` record at EventNumber.DeletedStream;
//   - soft undelete (SoftUndeleteStream): a write to a soft-deleted stream moves its `$tb` past the old events.
import { randomUUID } from 'node:crypto';
import { checkCommit, DELETED_STREAM, type CommitCheck } from './check-commit.js';
import { metastreamOf } from './stream-metadata.js';
import type { DeleteResult, ProposedEvent, RecordedEvent, StoreWriter } from './store-types.js';

/** A record the server writes itself (`$metadata`, `$streamDeleted`): a fresh id, a JSON content type. */
export function systemEvent(type: string, data: Uint8Array): ProposedEvent {
  return { id: randomUUID(), type, contentType: 'application/json', data, metadata: new Uint8Array() };
}

/**
 * StorageWriterService.SoftUndeleteStream: rewrite the stream's metadata with `$tb` = the first
 * revision of the recreated stream, keeping the other settings. Nothing is notified here: the
 * caller reports the record with the write that caused it.
 */
export function softUndelete(writer: StoreWriter, streamName: string, recreateFrom: bigint): RecordedEvent | undefined {
  const metastream = metastreamOf(streamName);
  const rawMeta = writer.lastEvent(metastream)?.data;
  if (!rawMeta) return undefined;
  let document: Record<string, unknown>;
  try {
    document = JSON.parse(Buffer.from(rawMeta).toString('utf8')) as Record<string, unknown>;
  } catch {
    return undefined; // the server also leaves unparsable metadata alone (ModifyMetadata)
  }
  const json = JSON.stringify({ ...document, $tb: '__TB__' }).replace('"__TB__"', recreateFrom.toString());
  return writer.appendEvent(metastream, systemEvent('$metadata', Buffer.from(json)));
}

function failureOf(check: CommitCheck): DeleteResult {
  const tombstoned = check.currentRevision === DELETED_STREAM;
  return tombstoned
    ? { kind: 'stream_deleted', streamName: check.streamName }
    : {
        kind: 'wrong_expected_version',
        streamName: check.streamName,
        expectedRevision: check.expectedRevision,
        currentRevision: check.currentRevision,
      };
}

/**
 * Soft delete (StorageWriterService WriteDelete, hardDelete = false): checked like a one-event
 * write, then `{"$tb": EventNumber.DeletedStream}` is written to the metastream. A stream that
 * never existed fails the consistency check.
 */
export function softDelete(writer: StoreWriter, streamName: string, expected: bigint): DeleteResult {
  const { index } = writer;
  const check = checkCommit(index, streamName, expected, [randomUUID()]);
  if (check.decision !== 'ok') return failureOf(check);
  if (index.lastEventNumber(streamName) < 0n && index.lastEventNumber(metastreamOf(streamName)) < 0n) {
    return failureOf({ ...check, decision: 'consistency_check_failure', currentRevision: -1n });
  }
  const recorded = writer.appendEvent(metastreamOf(streamName), systemEvent('$metadata', Buffer.from(`{"$tb":${DELETED_STREAM}}`)));
  writer.notify([recorded]);
  return { kind: 'ok', position: recorded.position };
}

/** Tombstone (WriteDelete, hardDelete = true): a `$streamDeleted` record at EventNumber.DeletedStream. */
export function tombstone(writer: StoreWriter, streamName: string, expected: bigint): DeleteResult {
  const check = checkCommit(writer.index, streamName, expected, [randomUUID()]);
  if (check.decision !== 'ok') return failureOf(check);
  // LogRecord.DeleteTombstone: flags IsCommitted only — an empty, non-JSON record.
  const tombstoneRecord = { ...systemEvent('$streamDeleted', new Uint8Array()), contentType: 'application/octet-stream' };
  const recorded = writer.writeTombstone(streamName, tombstoneRecord);
  writer.notify([recorded]);
  return { kind: 'ok', position: recorded.position };
}
