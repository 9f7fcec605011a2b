// The atomic append to one or more streams (a v1 append is the one-stream case), following
// KurrentDB's StorageWriterService.VerifyCommitChecks: every stream passes CheckCommit -> write
// (and soft-undelete what the write revives); every stream is an idempotent retry -> success with
// the original result, nothing written; otherwise the failures, reported as RequestManagerBase
// reports ConsistencyChecksFailed.
import { checkCommit, DELETED_STREAM, ExpectedVersion, type CommitCheck } from './check-commit.js';
import { softUndelete } from './store-deletes.js';
import { isMetastream, originalStreamOf } from './stream-metadata.js';
import type { AppendRequest, AppendResult, RecordedEvent, StoreWriter, StreamAppendResult } from './store-types.js';

export function appendToStreams(writer: StoreWriter, requests: ReadonlyArray<AppendRequest>): AppendResult {
  const checks = requests.map((r) => checkCommit(writer.index, r.streamName, r.expectedRevision, r.events.map((e) => e.id)));
  if (checks.every((c) => c.decision === 'ok')) return write(writer, requests, checks);
  const withEvents = checks.filter((_, i) => requests[i]!.events.length > 0);
  if (withEvents.length > 0 && withEvents.every((c) => c.decision === 'idempotent')) return idempotentRetry(checks, withEvents);
  return failed(checks);
}

function write(writer: StoreWriter, requests: ReadonlyArray<AppendRequest>, checks: ReadonlyArray<CommitCheck>): AppendResult {
  const { index } = writer;
  // Decided before the write (StorageWriterService `IsSoftDeletedMeta`): new metadata for a
  // soft-deleted stream undeletes it, whatever the new metadata says.
  const undeletesOriginal = requests.map((r) => isMetastream(r.streamName) && index.isSoftDeleted(originalStreamOf(r.streamName)));
  const written: RecordedEvent[] = [];
  let lastEvent: RecordedEvent | undefined;
  const results: StreamAppendResult[] = requests.map((request, i) => {
    const check = checks[i]!;
    let current = check.currentRevision;
    for (const event of request.events) {
      lastEvent = writer.appendEvent(request.streamName, event);
      written.push(lastEvent);
      current = lastEvent.revision;
    }
    return { kind: 'ok', streamName: request.streamName, currentRevision: current, position: undefined };
  });
  // Soft undelete after the write: the stream itself (writes to a soft-deleted stream), or the
  // stream whose metastream we just wrote to. An empty write to one stream undeletes too.
  requests.forEach((request, i) => {
    const check = checks[i]!;
    const wroteEvents = request.events.length > 0 || requests.length === 1;
    if (!wroteEvents) return;
    if (check.isSoftDeleted) {
      const undelete = softUndelete(writer, request.streamName, check.currentRevision + 1n);
      if (undelete) written.push(undelete);
    }
    if (undeletesOriginal[i]) {
      const original = originalStreamOf(request.streamName);
      const undelete = softUndelete(writer, original, index.lastEventNumber(original) + 1n);
      if (undelete) written.push(undelete);
    }
  });
  writer.notify(written);
  // The write's position is that of its last event (StorageChaser: CommitChased at the
  // TransactionEnd prepare; WriteEvents reports it as both commit and prepare position) —
  // not that of an undelete's $metadata record written after it.
  const position = lastEvent?.position;
  return {
    ok: true,
    streams: results.map((r) => (r.kind === 'ok' ? { ...r, position } : r)),
    position,
  };
}

/** The whole request was written before: answer with the original revisions and position. */
function idempotentRetry(checks: ReadonlyArray<CommitCheck>, withEvents: ReadonlyArray<CommitCheck>): AppendResult {
  const position = withEvents.reduce<bigint | undefined>(
    (max, c) => (c.idempotentPosition !== undefined && (max === undefined || c.idempotentPosition > max) ? c.idempotentPosition : max),
    undefined,
  );
  return {
    ok: true,
    streams: checks.map((c) => ({
      kind: 'ok',
      streamName: c.streamName,
      currentRevision: c.idempotentRevision ?? c.currentRevision,
      position,
    })),
    position,
  };
}

/**
 * RequestManagerBase.Handle(ConsistencyChecksFailed): a tombstoned stream, or a soft-deleted one
 * expected to exist, is reported as StreamDeleted; everything else as WrongExpectedVersion.
 */
function failed(checks: ReadonlyArray<CommitCheck>): AppendResult {
  const failures = checks.filter((c) => c.decision !== 'ok');
  const streams = failures.map((c): StreamAppendResult => {
    const tombstoned = c.currentRevision === DELETED_STREAM;
    const softDeleted = c.expectedRevision === ExpectedVersion.StreamExists && c.isSoftDeleted;
    return tombstoned || softDeleted
      ? { kind: 'stream_deleted', streamName: c.streamName }
      : { kind: 'wrong_expected_version', streamName: c.streamName, expectedRevision: c.expectedRevision, currentRevision: c.currentRevision };
  });
  return {
    ok: false,
    position: undefined,
    streams,
    failure: streams.some((r) => r.kind === 'stream_deleted') ? 'stream_deleted' : 'wrong_expected_version',
  };
}
