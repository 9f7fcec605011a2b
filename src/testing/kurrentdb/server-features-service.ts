// `ServerFeatures.GetSupportedMethods` (Services/Transport/Grpc/ServerFeatures.cs): the server lists
// its gRPC methods with service and method names lower-cased, plus a few feature flags. Clients
// decide from this list: the Node client uses Streams.BatchAppend when listed (else Streams.Append)
// and refuses multiStreamAppend unless StreamsService.AppendSession is listed; the Rust client in
// @kurrent/bridge parses the version (digits and dots, major.minor.patch) and fails on garbage.
import type * as grpc from '@grpc/grpc-js';
import { serverFeaturesPb, sharedPb } from './proto.js';

/** A version that has everything this server implements (multi-stream append arrived in 25.1). */
export const SERVER_VERSION = '25.1.0';

export interface AdvertisedFeatures {
  readonly batchAppend: boolean;
  readonly multiStreamAppend: boolean;
}

interface Method {
  readonly service: string;
  readonly method: string;
  readonly features?: ReadonlyArray<string>;
}

export function supportedMethods(features: AdvertisedFeatures): ReadonlyArray<Method> {
  const streams = 'event_store.client.streams.Streams';
  const methods: Method[] = [
    { service: streams, method: 'Read', features: ['position', 'events'] },
    { service: streams, method: 'Append' },
    { service: streams, method: 'Delete' },
    { service: streams, method: 'Tombstone' },
    { service: 'event_store.client.server_features.ServerFeatures', method: 'GetSupportedMethods' },
  ];
  if (features.batchAppend) methods.push({ service: streams, method: 'BatchAppend', features: ['deadline_duration'] });
  if (features.multiStreamAppend) methods.push({ service: 'kurrentdb.protocol.v2.streams.StreamsService', method: 'AppendSession' });
  return methods;
}

export function createServerFeaturesService(features: AdvertisedFeatures): grpc.UntypedServiceImplementation {
  return {
    getSupportedMethods(_call: grpc.ServerUnaryCall<sharedPb.Empty, serverFeaturesPb.SupportedMethods>, callback: grpc.sendUnaryData<serverFeaturesPb.SupportedMethods>) {
      const response = new serverFeaturesPb.SupportedMethods();
      response.setEventStoreServerVersion(SERVER_VERSION);
      for (const { service, method, features: flags = [] } of supportedMethods(features)) {
        const entry = new serverFeaturesPb.SupportedMethod();
        entry.setServiceName(service.toLowerCase());
        entry.setMethodName(method.toLowerCase());
        entry.setFeaturesList([...flags]);
        response.addMethods(entry);
      }
      callback(null, response);
    },
  };
}
