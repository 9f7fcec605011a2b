// mapping/: from one complete source transaction to versioned business events. Pure: no I/O.
// The stage's verb is `mapUnit`; everything else here supports it or the people writing mappers.
export {
  defineMapper,
  mapperRequirements,
  requiresReplicaIdentityFull,
  type AnyMapper,
  type ColumnOf,
  type EventFor,
  type MappedEvent,
  type Mapper,
  type MapperDefinition,
  type OnError,
  type RowOf,
  type TableAllowlist,
  type TableDeclaration,
  type TableDeclarations,
  type TableRequirement,
} from './define-mapper.js';
// isUnchangedToast / UNCHANGED_TOAST come from source/types.ts (already public via the root index).
export {
  createTransactionView,
  createStreamingView,
  type ChangeTransaction,
  type ChangeView,
  type DeleteView,
  type InsertView,
  type OneOf,
  type ReadView,
  type SnapshotTransaction,
  type Transaction,
  type UpdateView,
} from './transaction-view.js';
export { mapUnit, correlationId, checkMappedEvents, STANDARD_METADATA_KEYS, RESERVED_METADATA_PREFIXES, type EventToAppend, type MapContext, type MapResult } from './map-unit.js';
export { planLargeUnit, LARGE_UNIT_STEP, type LargeUnitPlan } from './map-large-unit.js';
export {
  contractViolationRecord,
  failedRecordsStream,
  DIAGNOSIS_MAX_KEYS,
  type ContractViolationDiagnosis,
  type DiagnosisKey,
  type FailedRecord,
  type FailedRecordType,
  type FailureDiagnosis,
} from './failed-record.js';
export { canonicalKey, changeEventId, snapshotEventId, uuidv5, DNS_NAMESPACE, EVENT_ASSEMBLER_NAMESPACE, type ChangeEventIdParts, type SnapshotEventIdParts } from './event-id.js';
export { checkMapperPurity, deepFreeze } from './purity.js';
export { MapperConfigError, MapperError, MapperOutputError, MapperPurityError, MapperUsageError } from './mapper-error.js';
