// The v1 `event_store.client.streams.Streams` service: Read, Append, BatchAppend, Delete, Tombstone,
// one handler file each (streams-read.ts, streams-append.ts, streams-batch-append.ts,
// streams-delete.ts), wired here. Sources: Services/Transport/Grpc/Streams.*.cs.
import type * as grpc from '@grpc/grpc-js';
import type { ServerContext } from './context.js';
import { createAppendHandler } from './streams-append.js';
import { createBatchAppendHandler } from './streams-batch-append.js';
import { createDeleteHandlers } from './streams-delete.js';
import { decodeStreamReadRequest } from './read-codec.js';
import { createReadHandler } from './streams-read.js';
import type { RegisterSubscription } from './streams-subscribe.js';

export { decodeUuid } from './streams-messages.js';

export function createStreamsService(context: ServerContext, registerSubscription: RegisterSubscription): grpc.UntypedServiceImplementation {
  const deletes = createDeleteHandlers(context);
  return {
    read: createReadHandler(context, registerSubscription),
    append: createAppendHandler(context),
    batchAppend: createBatchAppendHandler(context),
    delete: deletes.softDelete,
    tombstone: deletes.tombstone,
  };
}

/**
 * The v1 service definition with Read's plain stream reads decoded by hand (the rest by
 * google-protobuf, as generated), and responses already encoded by hand passed through as they
 * are (read-codec.ts): no google-protobuf objects per tail read or per event sent.
 */
export function streamsV1ServiceDefinition(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const read = definition['read'];
  if (!read) throw new Error('the v1 Streams service definition has no read');
  const { requestDeserialize, responseSerialize } = read;
  return {
    ...definition,
    read: {
      ...read,
      requestDeserialize: (bytes: Buffer) => decodeStreamReadRequest(bytes) ?? requestDeserialize(bytes),
      responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : responseSerialize(value)),
    },
  };
}
