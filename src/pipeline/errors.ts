import { EventAssemblerError } from '../errors.js';

/**
 * The slot is ahead of what this assembler recorded as durable in its checkpoint stream, or the
 * history it needs is gone: resuming would skip transactions (DESIGN invariant 7).
 */
export class RebuildNeededError extends EventAssemblerError {
  declare readonly code: 'REBUILD_NEEDED';
  constructor(message: string, details: Readonly<Record<string, unknown>>) {
    super(
      'REBUILD_NEEDED',
      `${message}. Rebuild: start the assembler with snapshot.mode 'when_needed' — it re-creates the slot and reads every captured table as a new snapshot generation (docs/runbook.md, EventAssemblerSlotLost) — and reconcile the consumers.`,
      details,
    );
  }
}

export type ContractViolationHaltDetails = {
  readonly assembler: string;
  readonly position: { readonly checkpoint: string | null; readonly commitLsn: string | null; readonly xid: number | null } | null;
  readonly eventId: string;
  readonly stream: string;
  readonly contract: string;
  readonly mapper: string | null;
  readonly violations: readonly { readonly path: string; readonly message: string }[];
};

/** An event violated its contract and `failurePolicy.contractViolation` is `halt`. Nothing of its transaction was appended. */
export class ContractViolationHaltError extends EventAssemblerError {
  declare readonly code: 'CONTRACT_VIOLATION_HALT';
  declare readonly details: ContractViolationHaltDetails;
  constructor(details: ContractViolationHaltDetails) {
    const where = details.position ? `commitLsn ${details.position.commitLsn} xid ${details.position.xid} (checkpoint ${details.position.checkpoint})` : 'a snapshot record';
    const list = details.violations.map((v) => `${v.path || '(root)'} ${v.message}`).join('; ');
    super(
      'CONTRACT_VIOLATION_HALT',
      `event ${details.contract} for stream "${details.stream}" (mapper ${details.mapper ?? '?'}) at ${where} violates its contract: ${list}. ` +
        'The line stopped before appending this transaction and the slot is not acknowledged past it; fix the mapper or the contract (or set failurePolicy.contractViolation to \'park\') and run again.',
      details,
    );
  }
}

export type UnavailableServer = 'PostgreSQL' | 'KurrentDB';

/**
 * A server stayed unreachable through start-up until `lifecycle.startupTimeoutMs` passed
 * (`event-assembler run` exits 4). Nothing was read or written.
 */
export class StartupUnavailableError extends EventAssemblerError {
  declare readonly code: 'SOURCE_UNAVAILABLE' | 'DESTINATION_UNAVAILABLE';
  declare readonly details: { readonly server: UnavailableServer; readonly address: string; readonly waitedMs: number; readonly reason: string | null };
  constructor(details: { server: UnavailableServer; address: string; waitedMs: number; reason: string | null }) {
    super(
      details.server === 'PostgreSQL' ? 'SOURCE_UNAVAILABLE' : 'DESTINATION_UNAVAILABLE',
      `${details.server} at ${details.address} stayed unreachable for ${details.waitedMs} ms of start-up (lifecycle.startupTimeoutMs)` +
        `${details.reason ? `: ${details.reason}` : ''}. Nothing was read or written; start again once it is reachable.`,
      details,
    );
  }
}

/** PostgreSQL answered at start-up, but with a refusal that waiting does not cure (authentication, unknown database, …). */
export class SourceConnectionError extends EventAssemblerError {
  declare readonly code: 'SOURCE_CONNECTION_FAILED';
  constructor(address: string, reason: string, sqlState: string | null) {
    super('SOURCE_CONNECTION_FAILED', `PostgreSQL at ${address} refused the capture connection: ${reason}${sqlState ? ` (SQLSTATE ${sqlState})` : ''}`, { server: 'PostgreSQL', address, reason, sqlState });
  }
}
