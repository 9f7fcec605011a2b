// Streams.Delete (soft) and Streams.Tombstone (hard), Services/Transport/Grpc/Streams.Delete.cs:
// both answer with the log position, or fail with WrongExpectedVersion / StreamDeleted as RPC errors.
import type * as grpc from '@grpc/grpc-js';
import type { ServerContext } from './context.js';
import { streamDeletedError, wrongExpectedVersionError } from './errors.js';
import { streamsPb } from './proto.js';
import { deleteTarget } from './streams-messages.js';

export function createDeleteHandlers(context: ServerContext) {
  const { store } = context;

  function deleteStream(operation: 'Delete' | 'Tombstone', request: streamsPb.DeleteReq | streamsPb.TombstoneReq): Promise<bigint> {
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

  return { softDelete, tombstone };
}
