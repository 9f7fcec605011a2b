// The contracts stage: JSON Schema contracts per event type and version — registry and
// validation, compatibility rules, the immutability check, upcasters. Codegen
// (`./codegen.js`) is left out on purpose: it loads json-schema-to-typescript and prettier,
// which a running assembler does not need; import it directly where types are generated.
export { createContractRegistry, contractViolationError, type Contract, type ContractRegistry } from './registry.js';
export {
  CONTRACT_DIALECT,
  CONTRACT_FILE_NAME,
  contractKey,
  inspectContractDocument,
  parseContractFileName,
  type ContractDocument,
  type ContractIdentity,
} from './document.js';
export type { ContractViolation, ValidationResult } from './validator.js';
export { ANNOTATION_KEYWORDS, compareSchemas, hasBreakingChange, type ContractChange, type ContractChangeKind } from './compatibility.js';
export {
  EDITABLE_ANNOTATIONS,
  checkContracts,
  formatFinding,
  immutabilityViolations,
  type CheckFinding,
  type CheckInput,
  type CheckReport,
  type ContractFile,
  type NewVersionReport,
} from './check.js';
export { defineUpcaster, missingUpcasters, upcast, type Upcaster, type VersionedEventData } from './upcasters.js';
export { ContractError, type ContractErrorCode } from './errors.js';
export { DEFAULT_CONTRACTS_DIR, loadContractDocuments, loadContractRegistry, readContractFiles } from './load.js';
