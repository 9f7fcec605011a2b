import type { Row } from '../source/types.js';
import type { VisibleChange } from './allowlist.js';
import { EVENT_ASSEMBLER_NAMESPACE, uuidv5 } from './event-id.js';
import { MapperOutputError } from './mapper-error.js';
import type { ContractViolationDiagnosis, DiagnosisKey, EventToAppend, FailedRecord, FailureDiagnosis } from './types.js';

// The failure types live in types.ts; re-exported for modules that import them from here.
export type { ContractViolationDiagnosis, DiagnosisKey, FailedRecord, FailedRecordType, FailureDiagnosis } from './types.js';

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

/** How many row keys a diagnosis lists; the rest are counted in `keysOmitted`. */
export const DIAGNOSIS_MAX_KEYS = 20;

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
  // An invalid event: the record says which event and field, and the fix (all from the mapper's own output).
  if (error instanceof MapperOutputError) return { name: error.name, message: error.message, code: error.code, output: error.details };
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
  'snapshot.kind',
  'source.tables',
  'source.operations',
  '$correlationId',
  'mapper',
  'assembler',
  'contract',
  // In the place of its event: a consumer counting a transaction's events (transaction.count) counts the record.
  'transaction.index',
  'transaction.count',
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
