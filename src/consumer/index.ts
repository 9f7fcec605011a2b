// The consumer kit: projections whose effects happen once. Shapes in types.ts; `defineProjection`
// (define-projection.ts), the runner (runner.ts: wiring; event-feed.ts the `$all` subscription;
// apply-batch.ts one batch's transaction and its guards; poison.ts failing handlers (parked-events.ts,
// replay-parked.ts: parked events listed and replayed after a fix); store.ts and
// store-rows.ts the state tables; projection-event.ts metadata → typed fields; source-version.ts
// last-write-wins order; partition.ts the stream hash; config.ts the `project` command's
// configuration). Generations: generation-store.ts (names, rows), rebuild.ts (rebuild-load.ts,
// rebuild-validate.ts), reader-switch.ts (the readers' views, rollback). Guide: docs/consumers.md.
export type * from './types.js';
export { defineProjection, DEFAULT_BATCH_SIZE, DEFAULT_RETRY } from './define-projection.js';
export { createProjectionRunner } from './runner.js';
export { applyBatch, type BatchTarget } from './apply-batch.js';
export { pruneReceipts, type PruneReceiptsOptions } from './store-rows.js';
export { listParkedEvents, type ParkedEvent, type ListParkedOptions } from './parked-events.js';
export { replayParked, RESOLVED_KINDS, type ReplayParkedOptions, type ParkedReplayResult, type ParkedReplayOutcome, type ParkedReplayKind } from './replay-parked.js';
export { DEFAULT_STATE_SCHEMA, ensureStore, storeTables, type StoreTables } from './store.js';
export { toProjectionEvent, recordedInput, type RecordedInput } from './projection-event.js';
export { compareSourceVersions, versionsComparable } from './source-version.js';
export { fnv1a32, partitionOf } from './partition.js';
export { rebuildProjection } from './rebuild.js';
export { rollbackProjection } from './reader-switch.js';
export { listGenerations, servingGeneration, generationSchema, generationKey, readerSchema } from './generation-store.js';
export { DEFAULT_SAMPLE } from './rebuild-validate.js';
export {
  ProjectionError,
  ProjectionConfigError,
  ProjectionConflictError,
  ProjectionLeaseHeldError,
  ProjectionHandlerError,
  ProjectionGenerationError,
  ProjectionValidationError,
  type ProjectionErrorCode,
  type HandlerFailureDetails,
  type ValidationFailureDetails,
} from './errors.js';
export { defineProjectionConfig, parseProjectionConfig, loadProjectionConfig, type ParseProjectionConfigOptions } from './config.js';
