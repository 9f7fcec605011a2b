// Streams.BatchAppend (bidirectional): requests carry a correlation id; the first chunk has the
// options, `is_final` closes the batch; one response per correlation id, errors as
// google.rpc.Status inside the response. Source: Services/Transport/Grpc/Streams.BatchAppend.cs.
import type * as grpc from '@grpc/grpc-js';
import { ExpectedVersion } from './check-commit.js';
import type { ServerContext } from './context.js';
import { maxAppendSizeExceededStatus, streamDeletedStatus, streamIdentifier, wrongExpectedVersionStatus } from './errors.js';
import { emptyPb, sharedPb, streamsPb } from './proto.js';
import { eventSizeOnDisk, type AppendResult, type ProposedEvent } from './store-types.js';
import { batchTarget, decodeUuid, toProposedEvent } from './streams-messages.js';

interface BatchHeader {
  correlationId: sharedPb.UUID;
  options: streamsPb.BatchAppendReq.Options | undefined;
}

interface PendingBatch extends BatchHeader {
  events: ProposedEvent[];
  size: number;
  failed: boolean;
}

export function createBatchAppendHandler(context: ServerContext) {
  return function batchAppend(call: grpc.ServerDuplexStream<streamsPb.BatchAppendReq, streamsPb.BatchAppendResp>): void {
    const pending = new Map<string, PendingBatch>();
    let open = true;
    let clientDone = false;
    let inFlight = 0;
    const close = () => {
      open = false;
    };
    // When the client half-closes, answer what is still with the writer, then end the call.
    const endIfIdle = () => {
      if (open && clientDone && inFlight === 0) {
        call.end();
        close();
      }
    };
    const send = (response: streamsPb.BatchAppendResp) => {
      if (open) call.write(response);
    };
    call.on('cancelled', close);
    call.on('error', close);
    call.on('end', () => {
      clientDone = true;
      endIfIdle();
    });

    call.on('data', (request: streamsPb.BatchAppendReq) => {
      const key = decodeUuid(request.getCorrelationId());
      let batch = pending.get(key);
      if (!batch) {
        batch = { correlationId: request.getCorrelationId()!, options: undefined, events: [], size: 0, failed: false };
        pending.set(key, batch);
      }
      if (request.hasOptions()) batch.options = request.getOptions();
      if (!batch.failed) {
        for (const message of request.getProposedMessagesList()) {
          const event = toProposedEvent(message);
          batch.size += eventSizeOnDisk(event);
          if (eventSizeOnDisk(event) > context.maxAppendEventSize || batch.size > context.maxAppendSize) {
            batch.failed = true;
            send(batchResponse(batch, (response) => response.setError(maxAppendSizeExceededStatus(context.maxAppendSize))));
            break;
          }
          batch.events.push(event);
        }
      }
      if (!request.getIsFinal()) return;
      pending.delete(key);
      if (batch.failed) return;
      const completed = batch;
      const { streamName, expected } = batchTarget(completed.options);
      inFlight += 1;
      context
        .applyWrite(() => context.store.append([{ streamName, expectedRevision: expected, events: completed.events }]), [streamName])
        .then(
          (result) => send(batchResult(completed, result)),
          (error: grpc.ServerErrorResponse) => {
            // An injected failure breaks the whole call, like a dropped connection would.
            if (open) call.emit('error', error);
            close();
          },
        )
        .finally(() => {
          inFlight -= 1;
          endIfIdle();
        });
    });
  };
}

/** BatchAppendResp echoes the correlation id, the stream and the expected position. */
function batchResponse(batch: BatchHeader, fill: (response: streamsPb.BatchAppendResp) => void): streamsPb.BatchAppendResp {
  const response = new streamsPb.BatchAppendResp();
  response.setCorrelationId(batch.correlationId);
  const { streamName, expected } = batchTarget(batch.options);
  response.setStreamIdentifier(streamIdentifier(streamName));
  if (expected === ExpectedVersion.Any) response.setAny(new emptyPb.Empty());
  else if (expected === ExpectedVersion.NoStream) response.setNoStream(new emptyPb.Empty());
  else if (expected === ExpectedVersion.StreamExists) response.setStreamExists(new emptyPb.Empty());
  else response.setStreamPosition(expected.toString());
  fill(response);
  return response;
}

/** The response to a written (or refused) batch: Success.Completed, or a StreamDeleted / WrongExpectedVersion status. */
export function batchResult(batch: BatchHeader, result: AppendResult): streamsPb.BatchAppendResp {
  const { streamName, expected } = batchTarget(batch.options);
  const stream = result.streams[0];
  return batchResponse(batch, (response) => {
    if (result.ok && stream?.kind === 'ok') {
      // BatchAppendResp.Success.Completed
      const success = new streamsPb.BatchAppendResp.Success();
      if (stream.currentRevision < 0n) success.setNoStream(new emptyPb.Empty());
      else success.setCurrentRevision(stream.currentRevision.toString());
      if (stream.position === undefined) success.setNoPosition(new emptyPb.Empty());
      else {
        const position = new sharedPb.AllStreamPosition();
        position.setCommitPosition(stream.position.toString());
        position.setPreparePosition(stream.position.toString());
        success.setPosition(position);
      }
      response.setSuccess(success);
    } else if (stream?.kind === 'stream_deleted') {
      response.setError(streamDeletedStatus(streamName));
    } else {
      const current = stream?.kind === 'wrong_expected_version' ? stream.currentRevision : -1n;
      response.setError(wrongExpectedVersionStatus(expected, current));
    }
  });
}
