/**
 * Snapshots: existing rows as `read` records, without gap or overlap with the change stream.
 * See docs/snapshots.md.
 */
export {
  createSlotWithSnapshot, readInitialSnapshot, runInitialSnapshot, snapshotRecords, openSnapshotConnection,
  type CreateSlotWithSnapshotOptions, type InitialSnapshotResult, type RunInitialSnapshotOptions, type ExportedSnapshotSlot, type ReadSnapshotOptions, type SnapshotBatch, type SnapshotReadMethod,
} from './initial.js';
export { createIncrementalSnapshot, type IncrementalSnapshot, type IncrementalSnapshotOptions } from './incremental.js';
export {
  createWatermarkWindow, decodeWatermark, encodeWatermark, invisibleTo, WATERMARK_PREFIX,
  type ChunkRow, type ChunkSnapshot, type ChunkSummary, type SnapshotChunk, type Watermark, type WatermarkWindow, type WindowOutput, type WindowTransaction,
} from './watermark-window.js';
export {
  createFileProgressStore, createMemoryProgressStore, isSnapshotFinished, newSnapshotProgress, parseSnapshotProgress, updateTable,
  type SnapshotKind, type SnapshotProgress, type SnapshotProgressStore, type TableProgress, type TableStatus,
} from './progress.js';
export {
  decideSnapshot, nextGeneration, unservableReason, SNAPSHOT_MODES,
  type SlotState, type SnapshotAction, type SnapshotDecision, type SnapshotDecisionInput, type SnapshotMode,
} from './modes.js';
export { createProgressReporter, formatProgressLine, formatProgressRecord, formatCount, formatDuration, type ProgressReporter } from './reporter.js';
export { adHocSnapshotProgress } from './ad-hoc.js';
export { decodeSnapshotRequest, emitSnapshotRequest, encodeSnapshotRequest, newSnapshotRequest, SNAPSHOT_REQUEST_PREFIX, type SnapshotRequest } from './request.js';
export { describeTable, keyString, publishedShape, quoteIdentifier, requireKey, rowFilterClause, SnapshotError, type KeyText, type PublishedShape, type SnapshotTable } from './catalog.js';
export { copyOut, type CopyOutOptions } from './copy.js';
export { createReplayModel, type ReplayModel } from './replay.js';
export { createReadKeySet, type ReadKeySet, type ReadKeySetOptions } from './read-key-set.js';
export { hasIntegerKey, keyAtOrBefore, keyValueText } from './key-order.js';
