// `event-assembler/testing`: rigs for users' own tests.
export {
  startEmbeddedPostgres,
  createTestDatabase,
  type EmbeddedPostgres,
  type EmbeddedPostgresOptions,
  type PostgresServerInfo,
  type TestDatabase,
  type ConnectionOptions,
  type RoleOptions,
  type ParameterValue,
} from './postgres.js';
export {
  insert,
  update,
  del,
  transaction,
  snapshotRecord,
  relation,
  mapperSpec,
  type ExpectedEvent,
  type MapperSpec,
  type MapperSpecWhen,
  type MapperSpecOptions,
  type RelationOptions,
  type TransactionOptions,
} from './mapper-kit.js';
export * from './kurrentdb/index.js';
export {
  verifyDestination,
  createReferenceSlot,
  createReferenceSlotWithSnapshot,
  dropReferenceSlot,
  formatDestinationReport,
  compareEvents,
  type VerifyDestinationOptions,
  type DestinationReport,
  type ExpectedEvent as ExpectedDestinationEvent,
  type EventRef,
} from './verify-destination.js';
export { startStandby, startFailoverPair, type StandbyPostgres, type StandbyOptions, type FailoverPair } from './postgres-standby.js';
