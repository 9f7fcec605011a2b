/**
 * Every event is validated against its contract before it is appended (DESIGN invariant 5).
 * A violation stops the line (`failurePolicy.contractViolation: 'halt'`, with a diagnosis) or
 * replaces the event by a `ContractViolation` failed record (`'park'`).
 */
import type { ResolvedConfig } from '../config/schema.js';
import type { ContractRegistry } from '../contracts/index.js';
import { contractViolationRecord, type EventToAppend, type FailedRecord } from '../mapping/index.js';
import type { SourceUnit } from '../source/types.js';
import { ContractViolationHaltError } from './errors.js';

/** Checks one event: `null` when it keeps its contract, else its failed record (policy park); throws under policy halt. */
export type ContractCheck = (event: EventToAppend, unit: SourceUnit) => FailedRecord | null;

export function createContractCheck(registry: ContractRegistry, config: Pick<ResolvedConfig, 'name' | 'contracts' | 'failurePolicy'>): ContractCheck {
  return (event, unit) => {
    let violations: readonly { path: string; message: string }[] | null = null;
    try {
      const result = registry.validate(event.type, event.version, event.data);
      if (!result.ok) violations = result.violations;
    } catch (error) {
      violations = [{ path: '', message: `no usable contract ${event.type}@${event.version} in ${config.contracts.dir}: ${error instanceof Error ? error.message : String(error)}` }];
    }
    if (!violations) return null;
    if (config.failurePolicy.contractViolation === 'halt') {
      throw new ContractViolationHaltError({
        assembler: config.name,
        position: unit.kind === 'transaction' ? { checkpoint: unit.position.checkpoint, commitLsn: unit.commitLsn, xid: unit.xid } : null,
        eventId: event.id,
        stream: event.stream,
        contract: `${event.type}@${event.version}`,
        mapper: event.metadata['mapper'] ?? null,
        violations: violations.map((v) => ({ path: v.path, message: v.message })),
      });
    }
    return contractViolationRecord(event, violations, { assembler: config.name });
  };
}
