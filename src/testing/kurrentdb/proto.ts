// The protocol modules generated from KurrentDB's .proto files, exactly as the client ships them
// (`@kurrent/kurrentdb-client/generated/...`). Using the client's own generated code means the
// in-memory server can never drift from the wire format the client speaks.
//
// The generated `*_pb.js` files are CommonJS (google-protobuf attaches everything to `exports`
// at run time), so Node cannot see named exports: import the default (= `module.exports`).
import sharedPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/shared_pb.js';
import statusPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/status_pb.js';
import streamsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_pb.js';
import streamsGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_grpc_pb.js';
import serverFeaturesPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/serverfeatures_pb.js';
import serverFeaturesGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/serverfeatures_grpc_pb.js';
import v2StreamsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/streams_pb.js';
import v2StreamsGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/streams_grpc_pb.js';
import v2ErrorsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v2/streams/errors_pb.js';
import anyPb from 'google-protobuf/google/protobuf/any_pb.js';
import emptyPb from 'google-protobuf/google/protobuf/empty_pb.js';
import timestampPb from 'google-protobuf/google/protobuf/timestamp_pb.js';

export {
  sharedPb,
  statusPb,
  streamsPb,
  streamsGrpc,
  serverFeaturesPb,
  serverFeaturesGrpc,
  v2StreamsPb,
  v2StreamsGrpc,
  v2ErrorsPb,
  anyPb,
  emptyPb,
  timestampPb,
};

/** Packs a message into `google.protobuf.Any` with the type URL the .NET server uses. */
export function packAny(message: { serializeBinary(): Uint8Array }, typeName: string): anyPb.Any {
  const any = new anyPb.Any();
  any.pack(message.serializeBinary(), typeName);
  return any;
}
