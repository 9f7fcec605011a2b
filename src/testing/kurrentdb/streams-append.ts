// Streams.Append (client streaming): options first, then one message per event. The size is
// checked while events arrive, as the server does; the write happens once the client ends.
// Source: Services/Transport/Grpc/Streams.Append.cs.
import type * as grpc from '@grpc/grpc-js';
import { ExpectedVersion } from './check-commit.js';
import type { ServerContext } from './context.js';
import { maxAppendSizeExceededError, streamDeletedError } from './errors.js';
import { sharedPb, streamsPb } from './proto.js';
import { eventSizeOnDisk, type AppendResult, type ProposedEvent } from './store-types.js';
import { appendTarget, toProposedEvent } from './streams-messages.js';

export function createAppendHandler(context: ServerContext) {
  return function append(
    call: grpc.ServerReadableStream<streamsPb.AppendReq, streamsPb.AppendResp>,
    callback: grpc.sendUnaryData<streamsPb.AppendResp>,
  ): void {
    let streamName = '';
    let expected: bigint = ExpectedVersion.Any;
    const events: ProposedEvent[] = [];
    let size = 0;
    let failed = false;
    const fail = (error: grpc.ServerErrorResponse) => {
      if (failed) return;
      failed = true;
      callback(error);
    };

    call.on('data', (request: streamsPb.AppendReq) => {
      if (failed) return;
      if (request.hasOptions()) {
        ({ streamName, expected } = appendTarget(request.getOptions()!));
        return;
      }
      const event = toProposedEvent(request.getProposedMessage()!);
      size += eventSizeOnDisk(event);
      if (eventSizeOnDisk(event) > context.maxAppendEventSize || size > context.maxAppendSize) {
        fail(maxAppendSizeExceededError(context.maxAppendSize));
        return;
      }
      events.push(event);
    });
    call.on('error', () => {
      failed = true;
    });
    call.on('end', () => {
      if (failed) return;
      context
        .applyWrite(() => context.store.append([{ streamName, expectedRevision: expected, events }]), [streamName])
        .then((result) => {
          if (failed) return;
          const stream = result.streams[0];
          if (stream?.kind === 'stream_deleted') return fail(streamDeletedError(streamName));
          callback(null, toAppendResp(result, expected));
        })
        .catch((error: grpc.ServerErrorResponse) => fail(error));
    });
  };
}

/** AppendResp: Success with revision and position, or WrongExpectedVersion (not an RPC error in v1). */
export function toAppendResp(result: AppendResult, expected: bigint): streamsPb.AppendResp {
  const response = new streamsPb.AppendResp();
  const stream = result.streams[0];
  if (result.ok && stream?.kind === 'ok') {
    const success = new streamsPb.AppendResp.Success();
    if (stream.currentRevision < 0n) success.setNoStream(new sharedPb.Empty());
    else success.setCurrentRevision(stream.currentRevision.toString());
    if (stream.position === undefined) success.setNoPosition(new sharedPb.Empty());
    else {
      const position = new streamsPb.AppendResp.Position();
      position.setCommitPosition(stream.position.toString());
      position.setPreparePosition(stream.position.toString());
      success.setPosition(position);
    }
    response.setSuccess(success);
    return response;
  }
  // Streams.Append.cs: WrongExpectedVersion carries the expected state and the actual revision,
  // in both the current fields and the deprecated *2060 ones.
  const current = stream?.kind === 'wrong_expected_version' ? stream.currentRevision : -1n;
  const wrong = new streamsPb.AppendResp.WrongExpectedVersion();
  if (current < 0n) {
    wrong.setCurrentNoStream(new sharedPb.Empty());
    wrong.setNoStream2060(new sharedPb.Empty());
  } else {
    wrong.setCurrentRevision(current.toString());
    wrong.setCurrentRevision2060(Number(current));
  }
  if (expected === ExpectedVersion.Any) {
    wrong.setExpectedAny(new sharedPb.Empty());
    wrong.setAny2060(new sharedPb.Empty());
  } else if (expected === ExpectedVersion.StreamExists) {
    wrong.setExpectedStreamExists(new sharedPb.Empty());
    wrong.setStreamExists2060(new sharedPb.Empty());
  } else if (expected === ExpectedVersion.NoStream) {
    wrong.setExpectedNoStream(new sharedPb.Empty());
  } else {
    wrong.setExpectedRevision(expected.toString());
    wrong.setExpectedRevision2060(Number(expected));
  }
  response.setWrongExpectedVersion(wrong);
  return response;
}
