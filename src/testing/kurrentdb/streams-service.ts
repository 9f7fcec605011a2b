// The v1 `event_store.client.streams.Streams` service: Read, Append, BatchAppend, Delete, Tombstone.
// Sources: Services/Transport/Grpc/Streams.Append.cs, Streams.BatchAppend.cs, Streams.Delete.cs.
import * as grpc from '@grpc/grpc-js';
import type { ServerContext } from './context.js';
import {
  maxAppendSizeExceededError,
  maxAppendSizeExceededStatus,
  streamDeletedError,
  streamDeletedStatus,
  streamIdentifier,
  wrongExpectedVersionError,
  wrongExpectedVersionStatus,
} from './errors.js';
import { emptyPb, sharedPb, streamsPb } from './proto.js';
import type { AppendResult, ProposedEvent } from './store.js';
import { eventSizeOnDisk, ExpectedVersion } from './store.js';
import { createReadHandler } from './streams-read.js';

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

function decodeStreamName(identifier: sharedPb.StreamIdentifier | undefined): string {
  return Buffer.from(identifier?.getStreamName_asU8() ?? new Uint8Array()).toString('utf8');
}

/** A v1 ProposedMessage: type and content type travel as metadata entries (Constants.Metadata). */
function toProposedEvent(message: streamsPb.AppendReq.ProposedMessage | streamsPb.BatchAppendReq.ProposedMessage): ProposedEvent {
  const metadata = message.getMetadataMap();
  return {
    id: decodeUuid(message.getId()).toLowerCase(), // the server parses ids as Guids and prints them lower-case
    type: metadata.get('type') ?? '',
    contentType: metadata.get('content-type') ?? 'application/octet-stream',
    data: message.getData_asU8(),
    metadata: message.getCustomMetadata_asU8(),
  };
}

export function createStreamsService(context: ServerContext, registerSubscription: (cancel: () => void) => () => void) {
  const { store } = context;

  /**
   * Streams.Append (client streaming): options first, then one message per event. The size is
   * checked while events arrive, as the server does; the write happens once the client ends.
   */
  function append(
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
        const options = request.getOptions()!;
        streamName = decodeStreamName(options.getStreamIdentifier());
        const Case = streamsPb.AppendReq.Options.ExpectedStreamRevisionCase;
        switch (options.getExpectedStreamRevisionCase()) {
          case Case.REVISION:
            expected = BigInt(options.getRevision());
            break;
          case Case.NO_STREAM:
            expected = ExpectedVersion.NoStream;
            break;
          case Case.STREAM_EXISTS:
            expected = ExpectedVersion.StreamExists;
            break;
          default:
            expected = ExpectedVersion.Any;
        }
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
        .applyWrite(() => store.append([{ streamName, expectedRevision: expected, events }]), [streamName])
        .then((result) => {
          if (failed) return;
          const stream = result.streams[0];
          if (stream?.kind === 'stream_deleted') return fail(streamDeletedError(streamName));
          callback(null, toAppendResp(result, expected));
        })
        .catch((error: grpc.ServerErrorResponse) => fail(error));
    });
  }

  function toAppendResp(result: AppendResult, expected: bigint): streamsPb.AppendResp {
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

  /**
   * Streams.BatchAppend (bidirectional): requests carry a correlation id; the first chunk has the
   * options, `is_final` closes the batch; one response per correlation id, errors as
   * google.rpc.Status inside the response.
   */
  function batchAppend(call: grpc.ServerDuplexStream<streamsPb.BatchAppendReq, streamsPb.BatchAppendResp>): void {
    interface PendingBatch {
      correlationId: sharedPb.UUID;
      options: streamsPb.BatchAppendReq.Options | undefined;
      events: ProposedEvent[];
      size: number;
      failed: boolean;
    }
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
        .applyWrite(() => store.append([{ streamName, expectedRevision: expected, events: completed.events }]), [streamName])
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
  }

  function batchTarget(options: streamsPb.BatchAppendReq.Options | undefined): { streamName: string; expected: bigint } {
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

  /** BatchAppendResp echoes the correlation id, the stream and the expected position. */
  function batchResponse(
    batch: { correlationId: sharedPb.UUID; options: streamsPb.BatchAppendReq.Options | undefined },
    fill: (response: streamsPb.BatchAppendResp) => void,
  ): streamsPb.BatchAppendResp {
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

  function batchResult(batch: { correlationId: sharedPb.UUID; options: streamsPb.BatchAppendReq.Options | undefined }, result: AppendResult) {
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

  type DeleteRequest = streamsPb.DeleteReq | streamsPb.TombstoneReq;

  function deleteTarget(request: DeleteRequest): { streamName: string; expected: bigint } {
    const options = request.getOptions();
    const streamName = decodeStreamName(options?.getStreamIdentifier());
    if (!options) return { streamName, expected: ExpectedVersion.Any };
    if (options.hasRevision()) return { streamName, expected: BigInt(options.getRevision()) };
    if (options.hasNoStream()) return { streamName, expected: ExpectedVersion.NoStream };
    if (options.hasStreamExists()) return { streamName, expected: ExpectedVersion.StreamExists };
    return { streamName, expected: ExpectedVersion.Any };
  }

  /**
   * Streams.Delete (soft) and Streams.Tombstone (hard), Streams.Delete.cs: both answer with the
   * log position, or fail with WrongExpectedVersion / StreamDeleted as RPC errors.
   */
  function deleteStream(operation: 'Delete' | 'Tombstone', request: DeleteRequest): Promise<bigint> {
    const { streamName, expected } = deleteTarget(request);
    return context
      .applyWrite(() => (operation === 'Delete' ? store.softDelete(streamName, expected) : store.tombstone(streamName, expected)), [streamName])
      .then((result) => {
        if (result.kind === 'stream_deleted') throw streamDeletedError(streamName);
        if (result.kind === 'wrong_expected_version') {
          throw wrongExpectedVersionError(operation, streamName, expected, result.currentRevision);
        }
        return result.position;
      });
  }

  function softDelete(
    call: grpc.ServerUnaryCall<streamsPb.DeleteReq, streamsPb.DeleteResp>,
    callback: grpc.sendUnaryData<streamsPb.DeleteResp>,
  ): void {
    deleteStream('Delete', call.request).then(
      (logPosition) => {
        const position = new streamsPb.DeleteResp.Position();
        position.setCommitPosition(logPosition.toString());
        position.setPreparePosition(logPosition.toString());
        callback(null, new streamsPb.DeleteResp().setPosition(position));
      },
      (error: grpc.ServerErrorResponse) => callback(error),
    );
  }

  function tombstone(
    call: grpc.ServerUnaryCall<streamsPb.TombstoneReq, streamsPb.TombstoneResp>,
    callback: grpc.sendUnaryData<streamsPb.TombstoneResp>,
  ): void {
    deleteStream('Tombstone', call.request).then(
      (logPosition) => {
        const position = new streamsPb.TombstoneResp.Position();
        position.setCommitPosition(logPosition.toString());
        position.setPreparePosition(logPosition.toString());
        callback(null, new streamsPb.TombstoneResp().setPosition(position));
      },
      (error: grpc.ServerErrorResponse) => callback(error),
    );
  }

  const service: grpc.UntypedServiceImplementation = {
    read: createReadHandler(context, registerSubscription),
    append,
    batchAppend,
    delete: softDelete,
    tombstone,
  };
  return service;
}
