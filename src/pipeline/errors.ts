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

/** PostgreSQL answered at start-up, but with a refusal that waiting does not cure (authentication, unknown database, TLS, …). */
export class SourceConnectionError extends EventAssemblerError {
  declare readonly code: 'SOURCE_CONNECTION_FAILED';
  declare readonly details: { readonly server: 'PostgreSQL'; readonly address: string; readonly reason: string; readonly sqlState: string | null; readonly fix: string };
  constructor(address: string, reason: string, sqlState: string | null) {
    const fix = connectionFix(reason, sqlState);
    super(
      'SOURCE_CONNECTION_FAILED',
      `PostgreSQL at ${address} (source.connection) refused the capture connection: ${reason}${sqlState ? ` (SQLSTATE ${sqlState})` : ''}. Nothing was read or written — fix: ${fix}`,
      { server: 'PostgreSQL', address, reason, sqlState, fix },
    );
  }
}

/** What to change for a refusal, by its SQLSTATE (or, for TLS, which the client refuses itself, by its message). */
function connectionFix(reason: string, sqlState: string | null): string {
  if (sqlState === '28P01') return "check the user and password in source.connection: they are the capture role's (`event-assembler setup --role` prints the SQL that creates it)";
  if (sqlState === '28000') return "allow this user, database and address in the server's pg_hba.conf (or check the user in source.connection)";
  if (sqlState === '3D000') return 'check the database name in source.connection: it does not exist on that server';
  if (/does not support SSL/i.test(reason)) return 'the server serves no TLS: remove sslmode from source.connection, or enable ssl on the server';
  if (/certificate|self[- ]signed|SSL|TLS/i.test(reason)) return "make source.connection's TLS settings (sslmode, sslrootcert) match the server's certificate";
  return 'check source.connection (host, port, user, password, database, TLS settings) against the server';
}

/**
 * KurrentDB answered at start-up with a refusal that waiting does not cure: a TLS handshake that
 * failed on what the two sides speak or trust (`tls=true` against a server without TLS, a
 * certificate not trusted).
 */
export class DestinationConnectionError extends EventAssemblerError {
  declare readonly code: 'DESTINATION_CONNECTION_FAILED';
  declare readonly details: { readonly server: 'KurrentDB'; readonly address: string; readonly reason: string; readonly fix: string };
  constructor(address: string, reason: string) {
    const fix = /wrong version number|packet length too long|unknown protocol/i.test(reason)
      ? 'the server does not speak TLS at that address: set tls=false in destination.connectionString (or serve TLS on the server)'
      : "make the server's certificate trusted: tlsCAFile=<its CA file> in destination.connectionString, and a certificate for the host you connect to";
    super(
      'DESTINATION_CONNECTION_FAILED',
      `KurrentDB at ${address} (destination.connectionString) refused the connection: the TLS handshake failed (${reason}). Nothing was read or written — fix: ${fix}`,
      { server: 'KurrentDB', address, reason, fix },
    );
  }
}
