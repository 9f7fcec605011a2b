// mapping/: from one complete source transaction to versioned business events. Pure: no I/O.
// The stage's verb is `mapUnit`; everything else here supports it or the people writing mappers.
// This file only re-exports: the shared types are in types.ts, each implementation in its own file.
export type {
  AnyMapper,
  ChangeTransaction,
  ChangeView,
  ColumnOf,
  ContractViolationDiagnosis,
  DeleteView,
  DiagnosisKey,
  EventFor,
  EventToAppend,
  FailedRecord,
  FailedRecordType,
  FailureDiagnosis,
  InsertView,
  MapContext,
  MappedEvent,
  Mapper,
  MapperDefinition,
  MapperOutputErrorDetails,
  MapResult,
  OnError,
  OneOf,
  ReadView,
  RowOf,
  SnapshotTransaction,
  TableAllowlist,
  TableDeclaration,
  TableDeclarations,
  TableRequirement,
  Transaction,
  UpdateView,
} from './types.js';
export { defineMapper, mapperRequirements, requiresReplicaIdentityFull } from './define-mapper.js';
// isUnchangedToast / UNCHANGED_TOAST come from source/types.ts (already public via the root index).
export { createTransactionView, createStreamingView } from './transaction-view.js';
export { mapUnit, correlationId, STANDARD_METADATA_KEYS } from './map-unit.js';
export { checkMappedEvents, RESERVED_METADATA_KEYS, RESERVED_METADATA_PREFIXES } from './check-mapped-event.js';
export { planLargeUnit, LARGE_UNIT_STEP, type LargeUnitPlan } from './map-large-unit.js';
export { contractViolationRecord, failedRecordsStream, DIAGNOSIS_MAX_KEYS } from './failed-record.js';
export { canonicalKey, changeEventId, snapshotEventId, uuidv5, DNS_NAMESPACE, EVENT_ASSEMBLER_NAMESPACE, type ChangeEventIdParts, type SnapshotEventIdParts } from './event-id.js';
export { checkMapperPurity, deepFreeze } from './purity.js';
export { MapperConfigError, MapperError, MapperOutputError, MapperPurityError, MapperUsageError } from './mapper-error.js';
