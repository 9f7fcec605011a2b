// The public API of event-assembler. Everything a user imports comes from here
// (or from `event-assembler/testing`).
export * from './errors.js';
export * from './source/types.js';
export {
  createPostgresSource,
  SourceConfigError,
  type PostgresSource,
  type PostgresSourceOptions,
  type PostgresSourceTable,
  type SourceStatus,
  type SourceState,
  type CommittedTransaction,
  type NonTransactionalMessage,
} from './source/index.js';
export {
  runStartupChecks,
  SourceCheckError,
  SourceChecksFailedError,
  type CapturedTable,
  type StartupCheckOptions,
  type StartupCheckReport,
} from './source/checks.js';
export { setupCapture, captureRoleSql, setupSql, type SetupCaptureOptions, type SetupCaptureReport, type CaptureRoleOptions } from './source/setup.js';
export { inspectTeardown, teardownCapture, TeardownError, type TeardownOptions, type TeardownPlan, type TeardownReport, type TeardownErrorCode } from './source/teardown.js';
export { ReplicationError } from './source/replication.js';
export {
  ZERO_LSN,
  isLsn,
  parseLsn,
  formatLsn,
  compareLsn,
  maxLsn,
  lsnDistance,
  encodeCheckpoint,
  decodeCheckpoint,
  makeSourcePosition,
  comparePositions,
  type PositionParts,
} from './source/position.js';
export * from './mapping/index.js';
export * from './contracts/index.js';
export {
  createTransactionBuffer,
  DEFAULT_MEMORY_LIMIT_BYTES,
  type TransactionBuffer,
  type TransactionBufferOptions,
} from './buffer/index.js';
export { decodePgoutput, createPgoutputDecoder } from './source/pgoutput/decoder.js';
export type * from './source/pgoutput/messages.js';
export { createRelationRegistry, type RelationRegistry } from './source/relations.js';
export { ValueDecodeError } from './source/values.js';
export * from './sink/index.js';
export * from './source/snapshot/index.js';
export * from './config/index.js';
export {
  createAssembler,
  createLogger,
  silentLogger,
  RebuildNeededError,
  ContractViolationHaltError,
  StartupUnavailableError,
  SourceConnectionError,
  DestinationConnectionError,
  type Assembler,
  type AssemblerDeps,
  type AssemblerRole,
  type AssemblerStatus,
  type RunSummary,
  type Logger,
  type LogFormat,
} from './pipeline/index.js';
export type { ObservabilityAddress, StatusDocument, SnapshotTableSignal, HeartbeatStatus, SlotReading, SlotDecodingStats, WalStatus } from './observability/index.js';
export type { OfflineStatus } from './observability/offline-status.js';
export * from './reconcile/index.js';
export {
  defineProjection,
  defineProjectionConfig,
  parseProjectionConfig,
  loadProjectionConfig,
  createProjectionRunner,
  applyBatch,
  pruneReceipts,
  listParkedEvents,
  replayParked,
  storeTables,
  ensureStore,
  toProjectionEvent,
  recordedInput,
  compareSourceVersions,
  versionsComparable,
  fnv1a32,
  partitionOf,
  DEFAULT_BATCH_SIZE,
  DEFAULT_STATE_SCHEMA,
  ProjectionError,
  ProjectionConfigError,
  ProjectionConflictError,
  ProjectionLeaseHeldError,
  ProjectionHandlerError,
  ProjectionGenerationError,
  ProjectionValidationError,
  rebuildProjection,
  rollbackProjection,
  listGenerations,
  servingGeneration,
  generationSchema,
  generationKey,
  readerSchema,
  type ProjectionErrorCode,
  type HandlerFailureDetails,
  type ValidationFailureDetails,
  type BatchTarget,
  type PruneReceiptsOptions,
  type ParkedEvent,
  type ListParkedOptions,
  type ReplayParkedOptions,
  type ParkedReplayResult,
  type ParkedReplayOutcome,
  type ParkedReplayKind,
  type StoreTables,
  type RecordedInput,
  type ParseProjectionConfigOptions,
} from './consumer/index.js';
export type {
  AllPosition,
  EventSource,
  SourceVersion,
  ProjectionEvent,
  ProjectionContext,
  EventMap,
  ProjectionHandler,
  ProjectionHandlers,
  PartitionSpec,
  ProjectionDefinition,
  Projection,
  RetryOptions as ProjectionRetryOptions,
  Guard,
  BatchOutcome,
  ProjectionLogger,
  ProjectionRunnerOptions,
  RunnerState,
  ProjectionStatus,
  ProjectionRunner,
  ProjectionConfig,
  ResolvedProjectionConfig,
  GenerationState,
  GenerationInfo,
  GenerationStoreOptions,
  ProjectionRow,
  RebuildValidation,
  RebuildOptions,
  RebuildResult,
  RollbackOptions,
  RollbackResult,
} from './consumer/index.js';
