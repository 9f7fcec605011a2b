import type { QualifiedTable, Row } from '../source/types.js';
import type { VisibleChange } from './allowlist.js';
import { EVENT_ASSEMBLER_NAMESPACE, uuidv5 } from './event-id.js';
import type { EventToAppend } from './map-unit.js';

/**
 * Failed records: what a `park` policy writes instead of stopping the line. Nothing is ever
 * skipped silently — a failure either halts with a `MapperError` or becomes one of these,
 * appended to the assembler's failed-records stream for an operator to inspect and replay.
 *
 * Every value in a failed record comes from the mapper's allowlisted view (keys, tables) or
 * from the mapper's own output/error, so a column the mapper did not declare cannot appear.
 */

/**
 * The failed-records stream of an assembler: `event-assembler.failed-<assembler>`.
 * Deliberately not `$…` (system streams need admin rights) nor `$$…` (KurrentDB's stream-metadata
 * namespace); its `<type>-<id>` form reads as entity `event-assembler.failed` / `<assembler>`.
 */
export function failedRecordsStream(assembler: string): string {
  return `event-assembler.failed-${assembler}`;
}

export type FailedRecordType = 'MapperFailed' | 'ContractViolation';

/** A row identity in a diagnosis: allowlisted key columns only, JSON-safe values. */
export interface DiagnosisKey {
  readonly table: QualifiedTable;
  readonly op: VisibleChange['op'];
  readonly key: Readonly<Record<string, unknown>>;
}

/** How many row keys a diagnosis lists; the rest are counted in `keysOmitted`. */
export const DIAGNOSIS_MAX_KEYS = 20;

/** Everything needed to find and act on a mapper failure. */
// A type alias (not an interface) so it fits EventAssemblerError's `details` record.
export type FailureDiagnosis = {
  readonly assembler: string;
  readonly mapper: string;
  readonly origin: 'change' | 'snapshot';
  /** Source position of the transaction (`null` for snapshot records). */
  readonly position: { readonly checkpoint: string; readonly commitLsn: string; readonly xid: number; readonly commitTime: string } | null;
  readonly snapshotGeneration: string | null;
  /** Tables the mapper saw in this unit. */
  readonly tables: readonly QualifiedTable[];
  /** Allowlisted keys of the rows the mapper saw (at most {@link DIAGNOSIS_MAX_KEYS}). */
  readonly keys: readonly DiagnosisKey[];
  readonly keysOmitted: number;
  readonly cause: { readonly name: string; readonly message: string; readonly code?: string };
};

export interface ContractViolationDiagnosis {
  readonly event: {
    readonly id: string;
    readonly stream: string;
    readonly type: string;
    readonly version: number;
    readonly contract: string;
    readonly data: Readonly<Record<string, unknown>>;
  };
  readonly violations: readonly { readonly path: string; readonly message: string }[];
  readonly mapper: string | null;
}

export interface FailedRecord {
  /** {@link failedRecordsStream} of the assembler. */
  readonly stream: string;
  /** Deterministic (UUIDv5), so a replayed failure is recognised like a replayed event. */
  readonly id: string;
  readonly type: FailedRecordType;
  readonly data: FailureDiagnosis | ContractViolationDiagnosis;
  /** Flat string values, like event metadata. */
  readonly metadata: Readonly<Record<string, string>>;
}

/** Makes a row value JSON-safe for a diagnosis (bigint → decimal string, bytes → `\x…` hex). */
export function jsonSafe(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'symbol') return value.description ?? 'symbol';
  if (Buffer.isBuffer(value)) return `\\x${value.toString('hex')}`;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(jsonSafe);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, jsonSafe(v)]));
  }
  return value;
}

export function diagnosisKeys(visible: readonly VisibleChange[]): { keys: DiagnosisKey[]; keysOmitted: number } {
  const keys = visible.slice(0, DIAGNOSIS_MAX_KEYS).map((c) => ({ table: c.table, op: c.op, key: jsonSafe(c.key) as Row }));
  return { keys, keysOmitted: Math.max(0, visible.length - DIAGNOSIS_MAX_KEYS) };
}

export function describeCause(error: unknown): FailureDiagnosis['cause'] {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? { name: error.name, message: error.message, code } : { name: error.name, message: error.message };
  }
  return { name: 'NonError', message: String(error) };
}

/** Standard metadata keys copied from an event onto its contract-violation record. */
const CARRIED_KEYS = [
  'source.checkpoint',
  'source.commitLsn',
  'source.xid',
  'source.commitTime',
  'origin',
  'snapshot.generation',
  'source.tables',
  'source.operations',
  '$correlationId',
  'mapper',
  'assembler',
  'contract',
] as const;

/**
 * The failed record for an event that violates its contract (`violations` as returned by the
 * contracts' `validate()`). Its id derives from the event's id; its stream is the assembler's
 * failed-records stream (assembler from the event's `assembler` metadata unless given).
 */
export function contractViolationRecord(
  event: EventToAppend,
  violations: readonly { readonly path: string; readonly message: string }[],
  options: { readonly assembler?: string } = {},
): FailedRecord {
  const assembler = options.assembler ?? event.metadata['assembler'];
  if (!assembler) throw new TypeError('contractViolationRecord: the event has no "assembler" metadata; pass { assembler }');
  const metadata: Record<string, string> = {};
  for (const key of CARRIED_KEYS) {
    const value = event.metadata[key];
    if (value !== undefined) metadata[key] = value;
  }
  metadata['failure.type'] = 'ContractViolation';
  metadata['failed.eventId'] = event.id;
  metadata['failed.stream'] = event.stream;
  metadata['assembler'] = assembler;
  const data: ContractViolationDiagnosis = {
    event: {
      id: event.id,
      stream: event.stream,
      type: event.type,
      version: event.version,
      contract: `${event.type}@${event.version}`,
      data: event.data,
    },
    violations: violations.map((v) => ({ path: v.path, message: v.message })),
    mapper: event.metadata['mapper'] ?? null,
  };
  return Object.freeze({
    stream: failedRecordsStream(assembler),
    id: uuidv5(JSON.stringify(['contract-violation', event.id]), EVENT_ASSEMBLER_NAMESPACE),
    type: 'ContractViolation',
    data,
    metadata: Object.freeze(metadata),
  });
}
