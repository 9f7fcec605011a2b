// The in-memory KurrentDB's store, file by file: metadata parsing (stream-metadata.ts), the log
// and stream index (stream-log.ts), the visible range of a stream read (read-stream.ts), and the
// append/delete rules as composed by createEventStore (store-append.ts, store-deletes.ts).
import { describe, expect, it } from 'vitest';
import { readStream } from '../../src/testing/kurrentdb/read-stream.js';
import { createEventStore, DELETED_STREAM, ExpectedVersion, type ProposedEvent } from '../../src/testing/kurrentdb/store.js';
import { createStreamLog } from '../../src/testing/kurrentdb/stream-log.js';
import { isMetastream, metastreamOf, originalStreamOf, parseStreamMetadata } from '../../src/testing/kurrentdb/stream-metadata.js';

let counter = 0;
function event(type = 'Happened', data = '{}'): ProposedEvent {
  counter += 1;
  const id = `00000000-0000-4000-8000-${counter.toString(16).padStart(12, '0')}`;
  return { id, type, contentType: 'application/json', data: Buffer.from(data), metadata: new Uint8Array() };
}

describe('stream-metadata', () => {
  it('names metastreams and back', () => {
    expect(metastreamOf('order-1')).toBe('$$order-1');
    expect(isMetastream('$$order-1')).toBe(true);
    expect(isMetastream('order-1')).toBe(false);
    expect(originalStreamOf('$$order-1')).toBe('order-1');
  });

  it('reads $tb, $maxCount and $maxAge as bigints, $tb up to 2^63-1', () => {
    expect(parseStreamMetadata(Buffer.from(`{"$tb":${DELETED_STREAM},"$maxCount": 3,"$maxAge":60}`))).toEqual({
      truncateBefore: DELETED_STREAM,
      maxCount: 3n,
      maxAge: 60n,
    });
    expect(parseStreamMetadata(Buffer.from('{"other":1}'))).toEqual({ truncateBefore: undefined, maxCount: undefined, maxAge: undefined });
  });
});

describe('stream-log', () => {
  it('gives revisions per stream and growing, non-contiguous positions across streams', () => {
    const log = createStreamLog();
    const a0 = log.appendToStream('a', event());
    const b0 = log.appendToStream('b', event());
    const a1 = log.appendToStream('a', event());
    expect([a0.revision, b0.revision, a1.revision]).toEqual([0n, 0n, 1n]);
    expect(a0.position > 0n).toBe(true);
    expect(b0.position > a0.position + 1n).toBe(true);
    expect(log.headPosition() > a1.position).toBe(true);
    expect(log.lastEventNumber('a')).toBe(1n);
    expect(log.lastEventNumber('never')).toBe(-1n);
    expect(log.logIndexAtOrAfter(b0.position)).toBe(1);
    expect(log.logIndexAtOrAfter(b0.position + 1n)).toBe(2);
    expect(log.streamNames()).toEqual(['a', 'b']);
  });

  it('a tombstone makes the last event number DELETED_STREAM and keeps the events', () => {
    const log = createStreamLog();
    log.appendToStream('a', event());
    const tombstone = log.writeTombstone('a', event('$streamDeleted'));
    expect(tombstone.revision).toBe(DELETED_STREAM);
    expect(log.lastEventNumber('a')).toBe(DELETED_STREAM);
    expect(log.isTombstoned('a')).toBe(true);
    expect(log.streamEvents('a')).toHaveLength(1);
    expect(log.recordCount()).toBe(2);
  });

  it('a stream is soft-deleted while its metadata has $tb = DELETED_STREAM', () => {
    const log = createStreamLog();
    log.appendToStream('a', event());
    expect(log.isSoftDeleted('a')).toBe(false);
    log.appendToStream('$$a', event('$metadata', `{"$tb":${DELETED_STREAM}}`));
    expect(log.isSoftDeleted('a')).toBe(true);
  });
});

describe('read-stream', () => {
  const revisions = (result: ReturnType<typeof readStream>) => (result.kind === 'ok' ? result.events.map((e) => e.revision) : result.kind);

  it('reads forwards and backwards from a revision, up to a count', () => {
    const log = createStreamLog();
    for (let i = 0; i < 5; i++) log.appendToStream('a', event());
    expect(revisions(readStream(log, 'a', 'forwards', 'start', 10n))).toEqual([0n, 1n, 2n, 3n, 4n]);
    expect(revisions(readStream(log, 'a', 'forwards', 2n, 2n))).toEqual([2n, 3n]);
    expect(revisions(readStream(log, 'a', 'forwards', 'end', 10n))).toEqual([]);
    expect(revisions(readStream(log, 'a', 'backwards', 'end', 2n))).toEqual([4n, 3n]);
    expect(revisions(readStream(log, 'a', 'backwards', 99n, 10n))).toEqual([4n, 3n, 2n, 1n, 0n]);
  });

  it('starts at $tb and keeps the last $maxCount events', () => {
    const log = createStreamLog();
    for (let i = 0; i < 6; i++) log.appendToStream('a', event());
    log.appendToStream('$$a', event('$metadata', '{"$tb":2}'));
    expect(revisions(readStream(log, 'a', 'forwards', 'start', 10n))).toEqual([2n, 3n, 4n, 5n]);
    log.appendToStream('$$a', event('$metadata', '{"$tb":2,"$maxCount":3}'));
    expect(revisions(readStream(log, 'a', 'forwards', 'start', 10n))).toEqual([3n, 4n, 5n]);
    expect(revisions(readStream(log, 'a', 'backwards', 'end', 10n))).toEqual([5n, 4n, 3n]);
    // A metastream's own metadata does not apply to it.
    expect(revisions(readStream(log, '$$a', 'forwards', 'start', 10n))).toEqual([0n, 1n]);
  });

  it('hides events older than $maxAge seconds', () => {
    const log = createStreamLog();
    const written = log.appendToStream('a', event());
    log.appendToStream('$$a', event('$metadata', '{"$maxAge":60}'));
    const writtenMs = Number(written.created / 10_000n);
    expect(revisions(readStream(log, 'a', 'forwards', 'start', 10n, writtenMs + 59_000))).toEqual([0n]);
    expect(revisions(readStream(log, 'a', 'forwards', 'start', 10n, writtenMs + 61_000))).toEqual([]);
  });

  it('a never-written or soft-deleted stream is not found, a tombstoned one deleted', () => {
    const log = createStreamLog();
    expect(readStream(log, 'never', 'forwards', 'start', 10n).kind).toBe('not_found');
    log.appendToStream('soft', event());
    log.appendToStream('$$soft', event('$metadata', `{"$tb":${DELETED_STREAM}}`));
    expect(readStream(log, 'soft', 'forwards', 'start', 10n).kind).toBe('not_found');
    log.appendToStream('hard', event());
    log.writeTombstone('hard', event('$streamDeleted'));
    expect(readStream(log, 'hard', 'forwards', 'start', 10n).kind).toBe('deleted');
  });
});

describe('store append and delete rules', () => {
  it('an all-or-nothing multi-stream append: one wrong expected revision writes nothing', () => {
    const store = createEventStore({});
    store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.NoStream, events: [event()] }]);
    const result = store.append([
      { streamName: 'a', expectedRevision: 0n, events: [event()] },
      { streamName: 'b', expectedRevision: 3n, events: [event()] },
    ]);
    expect(result).toEqual({
      ok: false,
      position: undefined,
      failure: 'wrong_expected_version',
      streams: [{ kind: 'wrong_expected_version', streamName: 'b', expectedRevision: 3n, currentRevision: -1n }],
    });
    expect(store.lastEventNumber('a')).toBe(0n);
    expect(store.lastEventNumber('b')).toBe(-1n);
  });

  it('a retry of the same events at the same revision answers with the original write, writing nothing', () => {
    const store = createEventStore({});
    const events = [event(), event()];
    const first = store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.NoStream, events }]);
    const count = store.recordCount();
    const retry = store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.NoStream, events }]);
    expect(retry).toEqual(first);
    expect(store.recordCount()).toBe(count);
  });

  it('commit listeners get every write in log order, until they unsubscribe', () => {
    const store = createEventStore({});
    const seen: string[] = [];
    const stop = store.onCommit((events) => seen.push(...events.map((e) => `${e.streamName}@${e.revision}`)));
    store.append([
      { streamName: 'a', expectedRevision: ExpectedVersion.Any, events: [event()] },
      { streamName: 'b', expectedRevision: ExpectedVersion.Any, events: [event()] },
    ]);
    store.softDelete('a', ExpectedVersion.Any);
    stop();
    store.append([{ streamName: 'b', expectedRevision: ExpectedVersion.Any, events: [event()] }]);
    expect(seen).toEqual(['a@0', 'b@0', '$$a@0']);
  });

  it('a write to a soft-deleted stream undeletes it: $tb moves past the old events', () => {
    const store = createEventStore({});
    store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.Any, events: [event(), event()] }]);
    expect(store.softDelete('a', 1n).kind).toBe('ok');
    expect(store.readStream('a', 'forwards', 'start', 10n).kind).toBe('not_found');
    const result = store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.Any, events: [event()] }]);
    expect(result.streams[0]).toMatchObject({ kind: 'ok', currentRevision: 2n });
    expect(store.streamMetadata('a').truncateBefore).toBe(2n);
    const read = store.readStream('a', 'forwards', 'start', 10n);
    expect(read.kind === 'ok' && read.events.map((e) => e.revision)).toEqual([2n]);
  });

  it('deleting a stream that never existed fails; a tombstoned stream refuses writes as deleted', () => {
    const store = createEventStore({});
    expect(store.softDelete('never', ExpectedVersion.Any)).toEqual({
      kind: 'wrong_expected_version',
      streamName: 'never',
      expectedRevision: ExpectedVersion.Any,
      currentRevision: -1n,
    });
    store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.Any, events: [event()] }]);
    expect(store.tombstone('a', 0n).kind).toBe('ok');
    expect(store.tombstone('a', ExpectedVersion.Any)).toEqual({ kind: 'stream_deleted', streamName: 'a' });
    const write = store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.Any, events: [event()] }]);
    expect(write.failure).toBe('stream_deleted');
  });

  it('forgetting volatile state empties the weak-idempotency cache: an `any` retry writes again', () => {
    const store = createEventStore({});
    const events = [event()];
    store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.Any, events }]);
    store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.Any, events }]);
    expect(store.lastEventNumber('a')).toBe(0n);
    store.forgetVolatileState();
    store.append([{ streamName: 'a', expectedRevision: ExpectedVersion.Any, events }]);
    expect(store.lastEventNumber('a')).toBe(1n);
  });
});
