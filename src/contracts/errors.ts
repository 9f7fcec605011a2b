import { EventAssemblerError } from '../errors.js';

/** Stable codes of the contracts stage. Never reworded once published. */
export type ContractErrorCode =
  | 'CONTRACT_UNKNOWN'
  | 'CONTRACT_INVALID_DOCUMENT'
  | 'CONTRACT_DUPLICATE'
  | 'CONTRACT_VIOLATION'
  | 'UPCASTER_INVALID'
  | 'UPCASTER_MISSING_STEP'
  | 'UPCAST_RESULT_INVALID'
  /** Reading contract files failed (missing directory, unreadable or unparsable file). */
  | 'CONTRACTS_IO_FAILED'
  /** A git command behind `contracts check --against` failed (not a repository, unknown ref). */
  | 'CONTRACTS_GIT_FAILED';

/** Any failure of the contracts stage: unknown contract, bad schema document, violation, upcasting. */
export class ContractError extends EventAssemblerError {
  declare readonly code: ContractErrorCode;

  constructor(code: ContractErrorCode, message: string, details: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super(code, message, details, options);
  }
}
