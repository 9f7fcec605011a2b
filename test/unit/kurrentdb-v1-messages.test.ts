// The in-memory KurrentDB's v1 message handling without a server: decoding what the client sends
// (streams-messages.ts), the filter of $all reads (event-filter.ts), and what Read, Append and
// BatchAppend answer (read-messages.ts, streams-append.ts, streams-batch-append.ts).
import { describe, expect, it } from 'vitest';
import { toEventFilter } from '../../src/testing/kurrentdb/event-filter.js';
import { emptyPb, sharedPb, streamsPb } from '../../src/testing/kurrentdb/proto.js';
import { caughtUp, encodeUuid, toReadResp } from '../../src/testing/kurrentdb/read-messages.js';
import { ExpectedVersion, type RecordedEvent } from '../../src/testing/kurrentdb/store.js';
import { toAppendResp } from '../../src/testing/kurrentdb/streams-append.js';
import { batchResult } from '../../src/testing/kurrentdb/streams-batch-append.js';
import { appendTarget, batchTarget, decodeUuid, deleteTarget, toProposedEvent } from '../../src/testing/kurrentdb/streams-messages.js';

const ID = 'f3a1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b';

function recorded(streamName: string, type: string): RecordedEvent {
  return { streamName, id: ID, type, contentType: 'application/json', data: Buffer.from('{}'), metadata: new Uint8Array(), revision: 3n, position: 5000n, created: 1n };
}

function identifier(streamName: string): sharedPb.StreamIdentifier {
  return new sharedPb.StreamIdentifier().setStreamName(Buffer.from(streamName, 'utf8'));
}

describe('streams-messages: what the client sends', () => {
  it('decodes UUIDs sent as text and as two signed int64 halves (high bits set)', () => {
    expect(decodeUuid(new sharedPb.UUID().setString(ID))).toBe(ID);
    const structured = encodeUuid(ID, { uuidAsString: false });
    expect(structured.hasStructured()).toBe(true);
    expect(structured.getStructured()!.getMostSignificantBits().startsWith('-')).toBe(true);
    expect(decodeUuid(structured)).toBe(ID);
    expect(decodeUuid(undefined)).toBe('');
  });

  it('a proposed message: type and content type from metadata entries, the id lower-cased', () => {
    const message = new streamsPb.AppendReq.ProposedMessage();
    message.setId(new sharedPb.UUID().setString(ID.toUpperCase()));
    message.getMetadataMap().set('type', 'OrderPlaced');
    message.setData(Buffer.from('{"a":1}'));
    message.setCustomMetadata(Buffer.from('{"m":2}'));
    const event = toProposedEvent(message);
    expect(event).toMatchObject({ id: ID, type: 'OrderPlaced', contentType: 'application/octet-stream' });
    expect(Buffer.from(event.data).toString()).toBe('{"a":1}');
    expect(Buffer.from(event.metadata).toString()).toBe('{"m":2}');
  });

  it('reads the expected revision of an append, a batch and a delete', () => {
    const append = new streamsPb.AppendReq.Options().setStreamIdentifier(identifier('order-1')).setRevision('7');
    expect(appendTarget(append)).toEqual({ streamName: 'order-1', expected: 7n });
    expect(appendTarget(new streamsPb.AppendReq.Options().setNoStream(new sharedPb.Empty())).expected).toBe(ExpectedVersion.NoStream);
    expect(appendTarget(new streamsPb.AppendReq.Options()).expected).toBe(ExpectedVersion.Any);

    const batch = new streamsPb.BatchAppendReq.Options().setStreamIdentifier(identifier('order-2')).setStreamExists(new emptyPb.Empty());
    expect(batchTarget(batch)).toEqual({ streamName: 'order-2', expected: ExpectedVersion.StreamExists });
    expect(batchTarget(undefined)).toEqual({ streamName: '', expected: ExpectedVersion.Any });

    const del = new streamsPb.DeleteReq().setOptions(new streamsPb.DeleteReq.Options().setStreamIdentifier(identifier('order-3')).setRevision('2'));
    expect(deleteTarget(del)).toEqual({ streamName: 'order-3', expected: 2n });
    expect(deleteTarget(new streamsPb.TombstoneReq())).toEqual({ streamName: '', expected: ExpectedVersion.Any });
  });
});

describe('event-filter: $all filters', () => {
  const Expression = streamsPb.ReadReq.Options.FilterOptions.Expression;

  it('matches stream-name prefixes', () => {
    const filter = toEventFilter(new streamsPb.ReadReq.Options.FilterOptions().setStreamIdentifier(new Expression().setPrefixList(['order-', 'invoice-'])));
    expect(filter(recorded('order-1', 'X'))).toBe(true);
    expect(filter(recorded('invoice-9', 'X'))).toBe(true);
    expect(filter(recorded('customer-1', 'order-'))).toBe(false);
  });

  it('matches event types with an unanchored regular expression', () => {
    const filter = toEventFilter(new streamsPb.ReadReq.Options.FilterOptions().setEventType(new Expression().setRegex('Placed')));
    expect(filter(recorded('a', 'OrderPlacedV2'))).toBe(true);
    expect(filter(recorded('Placed', 'OrderShipped'))).toBe(false);
  });
});

describe('read-messages: what Read answers', () => {
  it('a read event carries type, content type and created as metadata, positions as commit and prepare', () => {
    const response = toReadResp(recorded('order-1', 'OrderPlaced'), { uuidAsString: true });
    const event = response.getEvent()!.getEvent()!;
    expect(event.getId()!.getString()).toBe(ID);
    expect(event.getMetadataMap().get('type')).toBe('OrderPlaced');
    expect(event.getMetadataMap().get('content-type')).toBe('application/json');
    expect(event.getMetadataMap().get('created')).toBe('1');
    expect([event.getStreamRevision(), event.getCommitPosition(), event.getPreparePosition()]).toEqual(['3', '5000', '5000']);
    expect(response.getEvent()!.getCommitPosition()).toBe('5000');
  });

  it('CaughtUp leaves out a revision of an empty stream (-1)', () => {
    expect(caughtUp({ revision: -1n }).getCaughtUp()!.hasStreamRevision()).toBe(false);
    expect(caughtUp({ revision: 4n }).getCaughtUp()!.getStreamRevision()).toBe('4');
    expect(caughtUp({ position: 9000n }).getCaughtUp()!.getPosition()!.getCommitPosition()).toBe('9000');
  });
});

describe('Append and BatchAppend answers', () => {
  it('Append success: revision and position; an empty write to a new stream: no stream, no position', () => {
    const ok = toAppendResp({ ok: true, position: 100n, streams: [{ kind: 'ok', streamName: 'a', currentRevision: 2n, position: 100n }] }, ExpectedVersion.Any);
    expect(ok.getSuccess()!.getCurrentRevision()).toBe('2');
    expect(ok.getSuccess()!.getPosition()!.getCommitPosition()).toBe('100');
    const empty = toAppendResp({ ok: true, position: undefined, streams: [{ kind: 'ok', streamName: 'a', currentRevision: -1n, position: undefined }] }, ExpectedVersion.NoStream);
    expect(empty.getSuccess()!.hasNoStream()).toBe(true);
    expect(empty.getSuccess()!.hasNoPosition()).toBe(true);
  });

  it('Append WrongExpectedVersion fills the current and the deprecated 2060 fields', () => {
    const wrong = toAppendResp(
      { ok: false, position: undefined, failure: 'wrong_expected_version', streams: [{ kind: 'wrong_expected_version', streamName: 'a', expectedRevision: 1n, currentRevision: 4n }] },
      1n,
    ).getWrongExpectedVersion()!;
    expect([wrong.getCurrentRevision(), wrong.getCurrentRevision2060(), wrong.getExpectedRevision(), wrong.getExpectedRevision2060()]).toEqual(['4', 4, '1', 1]);
    const any = toAppendResp({ ok: false, position: undefined, streams: [{ kind: 'wrong_expected_version', streamName: 'a', expectedRevision: ExpectedVersion.Any, currentRevision: -1n }] }, ExpectedVersion.Any).getWrongExpectedVersion()!;
    expect([any.hasCurrentNoStream(), any.hasNoStream2060(), any.hasExpectedAny(), any.hasAny2060()]).toEqual([true, true, true, true]);
  });

  it('BatchAppend echoes correlation id, stream and expected position; a deleted stream is a NotFound status', () => {
    const correlationId = new sharedPb.UUID().setString(ID);
    const options = new streamsPb.BatchAppendReq.Options().setStreamIdentifier(identifier('order-1')).setStreamPosition('5');
    const response = batchResult({ correlationId, options }, { ok: false, position: undefined, failure: 'stream_deleted', streams: [{ kind: 'stream_deleted', streamName: 'order-1' }] });
    expect(response.getCorrelationId()!.getString()).toBe(ID);
    expect(Buffer.from(response.getStreamIdentifier()!.getStreamName_asU8()).toString()).toBe('order-1');
    expect(response.getStreamPosition()).toBe('5');
    expect(response.getError()!.getCode()).toBe(5); // grpc NOT_FOUND
    expect(response.getError()!.getMessage()).toBe('StreamDeleted');
  });
});
