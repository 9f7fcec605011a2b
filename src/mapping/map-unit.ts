import type { SourceUnit } from '../source/types.js';
import { touchesDeclaredTables, type DeclaredChange, type VisibleChange } from './allowlist.js';
import { checkMappedEvents, type CheckedEvent } from './check-mapped-event.js';
import { canonicalKey, changeEventId, EVENT_ASSEMBLER_NAMESPACE, snapshotEventId, uuidv5 } from './event-id.js';
import { describeCause, diagnosisKeys, failedRecordsStream } from './failed-record.js';
import { MapperConfigError, MapperError } from './mapper-error.js';
import { createTransactionView } from './transaction-view.js';
import type { AnyMapper, EventToAppend, FailedRecord, FailureDiagnosis, MapContext, MapResult } from './types.js';

// The mapping context and result types live in types.ts; re-exported for modules that import them from here.
export type { EventToAppend, MapContext, MapResult } from './types.js';

/**
 * The standard metadata keys, filled in by the SDK. A mapper's own metadata is merged in but
 * cannot overwrite these.
 */
export const STANDARD_METADATA_KEYS = [
  'source.checkpoint',
  'source.commitLsn',
  'source.xid',
  'source.commitTime',
  'origin',
  'snapshot.generation',
  'snapshot.kind',
  'source.tables',
  'source.operations',
  'entity.type',
  'entity.id',
  '$correlationId',
  'contract',
  'transaction.index',
  'transaction.count',
  'mapper',
  'assembler',
] as const;

const STANDARD = new Set<string>(STANDARD_METADATA_KEYS);

function hasNoKeys(object: object): boolean {
  for (const _ in object) return false;
  return true;
}

/**
 * The transaction identity shared by all events of one source unit (`$correlationId`):
 * `<sourceIdentity>:<commitLsn>:<xid>` for transactions; for snapshot records
 * `<sourceIdentity>:snapshot:<generation>:<table>:<digest of the key>` (a digest, so that key
 * columns a mapper did not allowlist never show in metadata).
 */
export function correlationId(unit: SourceUnit, context: MapContext, keyText?: string): string {
  if (unit.kind === 'transaction') return `${context.sourceIdentity}:${unit.commitLsn}:${unit.xid}`;
  const keyDigest = uuidv5(keyText ?? canonicalKey(unit.change.key), EVENT_ASSEMBLER_NAMESPACE);
  return `${context.sourceIdentity}:snapshot:${unit.snapshotGeneration}:${unit.table}:${keyDigest}`;
}

/** The distinct values of one field of the changes, sorted, comma-separated (most units: one or two values). */
function distinctSorted(visible: readonly { readonly table: string; readonly op: string }[], field: 'table' | 'op'): string {
  // One or two distinct values (most units) without an array to sort: Array#sort copies its
  // elements on every call, ≈ 5 % of what a streamed transaction allocated (allocation profile).
  let first: string | undefined;
  let second: string | undefined;
  let values: string[] | null = null;
  for (let i = 0; i < visible.length; i++) {
    const value = visible[i]![field];
    if (value === first || value === second) continue;
    if (first === undefined) first = value;
    else if (second === undefined) second = value;
    else if (values === null) values = [first, second, value];
    else if (!values.includes(value)) values.push(value);
  }
  if (values !== null) return values.sort().join(',');
  if (second === undefined) return first ?? '';
  return first! < second ? `${first},${second}` : `${second},${first}`;
}

/**
 * Metadata describing the unit as one mapper saw it (shared by its events and its failed records).
 * `keyText`: a snapshot record's `canonicalKey(key)`, when the caller has it.
 */
export function sourceMetadata(unit: SourceUnit, visible: readonly { readonly table: string; readonly op: string }[], context: MapContext, mapper: string, keyText?: string): Record<string, string> {
  const metadata: Record<string, string> = {};
  if (unit.kind === 'transaction') {
    metadata['source.checkpoint'] = unit.position.checkpoint;
    metadata['source.commitLsn'] = unit.commitLsn;
    metadata['source.xid'] = String(unit.xid);
    metadata['source.commitTime'] = unit.commitTime;
    metadata['origin'] = 'change';
  } else {
    metadata['origin'] = 'snapshot';
    metadata['snapshot.generation'] = unit.snapshotGeneration;
    if (unit.snapshotKind !== undefined) metadata['snapshot.kind'] = unit.snapshotKind;
  }
  metadata['source.tables'] = distinctSorted(visible, 'table');
  metadata['source.operations'] = distinctSorted(visible, 'op');
  metadata['$correlationId'] = correlationId(unit, context, keyText);
  metadata['mapper'] = mapper;
  metadata['assembler'] = context.assembler;
  return metadata;
}

/** What a failure diagnosis shows of the unit: its tables, and the first keys of the changes the mapper saw. */
export interface DiagnosisScope {
  /** Tables of the changes the mapper saw, sorted. */
  readonly tables: readonly string[];
  /** The changes the mapper saw (at least the first `DIAGNOSIS_MAX_KEYS` of them). */
  readonly visible: readonly VisibleChange[];
  /** How many changes the mapper saw in all. */
  readonly total: number;
}

function scopeOf(visible: readonly VisibleChange[]): DiagnosisScope {
  return { tables: [...new Set(visible.map((c) => c.table))].sort(), visible, total: visible.length };
}

export function diagnose(unit: SourceUnit, scope: DiagnosisScope, context: MapContext, mapper: string, error: unknown): FailureDiagnosis {
  const { keys } = diagnosisKeys(scope.visible);
  return {
    assembler: context.assembler,
    mapper,
    origin: unit.kind === 'transaction' ? 'change' : 'snapshot',
    position:
      unit.kind === 'transaction'
        ? { checkpoint: unit.position.checkpoint, commitLsn: unit.commitLsn, xid: unit.xid, commitTime: unit.commitTime }
        : null,
    snapshotGeneration: unit.kind === 'snapshot' ? unit.snapshotGeneration : null,
    tables: [...scope.tables],
    keys,
    keysOmitted: Math.max(0, scope.total - keys.length),
    cause: describeCause(error),
  };
}

/**
 * The event to append for a mapper's checked event: deterministic id (from the unit, the mapper
 * and the event's `ordinal` among the mapper's events), standard metadata (`source` holds the
 * unit's part, shared by the mapper's events), `transaction.index` / `transaction.count` across
 * all mappers. `keyText`: a snapshot record's `canonicalKey(key)`, when the caller has it.
 */
export function eventToAppend(unit: SourceUnit, context: MapContext, mapper: string, source: Readonly<Record<string, string>>, checked: CheckedEvent, ordinal: number, index: number, count: number, keyText?: string): EventToAppend {
  const { event, entity } = checked;
  const own = event.metadata;
  let metadata: Record<string, string>;
  if (unit.kind === 'transaction' && (!own || hasNoKeys(own))) {
    // The common case, as one literal: the same keys in the same order as the general case
    // below (metadata JSON is stored in that order), with a shape V8 creates and walks fast.
    metadata = {
      'source.checkpoint': source['source.checkpoint']!,
      'source.commitLsn': source['source.commitLsn']!,
      'source.xid': source['source.xid']!,
      'source.commitTime': source['source.commitTime']!,
      origin: source['origin']!,
      'source.tables': source['source.tables']!,
      'source.operations': source['source.operations']!,
      $correlationId: source['$correlationId']!,
      mapper: source['mapper']!,
      assembler: source['assembler']!,
      'entity.type': entity.type,
      'entity.id': entity.id,
      contract: `${event.type}@${event.version}`,
      'transaction.index': String(index),
      'transaction.count': String(count),
    };
  } else if (unit.kind === 'snapshot' && unit.snapshotKind !== undefined && (!own || hasNoKeys(own))) {
    // A snapshot record's common case (the pipeline sets its kind), as one literal: the keys of the general case below, in its order.
    metadata = {
      origin: source['origin']!,
      'snapshot.generation': source['snapshot.generation']!,
      'snapshot.kind': source['snapshot.kind']!,
      'source.tables': source['source.tables']!,
      'source.operations': source['source.operations']!,
      $correlationId: source['$correlationId']!,
      mapper: source['mapper']!,
      assembler: source['assembler']!,
      'entity.type': entity.type,
      'entity.id': entity.id,
      contract: `${event.type}@${event.version}`,
      'transaction.index': String(index),
      'transaction.count': String(count),
    };
  } else {
    metadata = {};
    if (own) for (const k in own) if (!STANDARD.has(k)) metadata[k] = own[k]!;
    for (const k in source) metadata[k] = source[k]!;
    metadata['entity.type'] = entity.type;
    metadata['entity.id'] = entity.id;
    metadata['contract'] = `${event.type}@${event.version}`;
    metadata['transaction.index'] = String(index);
    metadata['transaction.count'] = String(count);
  }
  const id =
    unit.kind === 'transaction'
      ? changeEventId({ assembler: context.assembler, sourceIdentity: context.sourceIdentity, commitLsn: unit.commitLsn, xid: unit.xid, mapper, ordinal })
      : snapshotEventId({ assembler: context.assembler, snapshotGeneration: unit.snapshotGeneration, table: unit.table, key: unit.change.key, keyText, mapper, ordinal });
  return Object.freeze({
    id,
    stream: event.stream,
    type: event.type,
    version: event.version,
    data: event.data as Readonly<Record<string, unknown>>,
    metadata: Object.freeze(metadata),
  });
}

/**
 * Runs every mapper on one source unit (a committed transaction or a snapshot record).
 *
 * Each mapper sees only its allowlisted view and is not called when nothing it declared is in
 * the unit. Events get deterministic ids and the standard metadata; `transaction.index` /
 * `transaction.count` number the unit's events across all mappers (in mapper order), so a
 * consumer can tell a complete transaction from a partial one. A failing mapper halts the
 * line (`MapperError`) or, with `onError: 'park'`, yields a `MapperFailed` record while the
 * other mappers' events go on (the count then covers the events actually produced).
 */
export function mapUnit(mappers: readonly AnyMapper[], unit: SourceUnit, context: MapContext): MapResult {
  checkMapContext(mappers, context);
  const produced: { mapper: string; declared: readonly DeclaredChange[]; checked: CheckedEvent[] }[] = [];
  const failed: FailedRecord[] = [];
  for (const mapper of mappers) {
    if (!touchesDeclaredTables(unit, mapper.tables)) continue;
    const view = createTransactionView(unit, mapper.tables);
    const { tx, isEmpty } = view;
    if (isEmpty) continue;
    let checked: CheckedEvent[];
    try {
      checked = checkMappedEvents(mapper.map(tx), mapper.name);
    } catch (error) {
      const diagnosis = diagnose(unit, scopeOf(view.visible), context, mapper.name, error);
      if (mapper.onError === 'halt') throw new MapperError(diagnosis, { cause: error });
      failed.push(mapperFailedRecord(unit, view.visible, context, mapper.name, diagnosis));
      continue;
    }
    produced.push({ mapper: mapper.name, declared: view.declared, checked });
  }

  const count = produced.reduce((n, p) => n + p.checked.length, 0);
  const events: EventToAppend[] = [];
  // A snapshot record's key text, once: its correlation id and every event id hash it.
  const keyText = unit.kind === 'snapshot' && produced.length > 0 ? canonicalKey(unit.change.key) : undefined;
  for (const { mapper, declared, checked } of produced) {
    const source = sourceMetadata(unit, declared, context, mapper, keyText);
    for (let ordinal = 0; ordinal < checked.length; ordinal++) events.push(eventToAppend(unit, context, mapper, source, checked[ordinal]!, ordinal, events.length, count, keyText));
  }
  return { events, failed };
}

/** Checks what every mapping needs: the context's names, and mapper names unique (they are part of event ids). */
export function checkMapContext(mappers: readonly AnyMapper[], context: MapContext): void {
  if (!context || typeof context.assembler !== 'string' || context.assembler === '') {
    throw new MapperConfigError('(context)', 'assembler', 'must be a non-empty string');
  }
  if (typeof context.sourceIdentity !== 'string' || context.sourceIdentity === '') {
    throw new MapperConfigError('(context)', 'sourceIdentity', 'must be a non-empty string');
  }
  // Pairwise, not through a Set: this runs for every unit, and a configuration has a few mappers.
  for (let i = 1; i < mappers.length; i++) {
    const name = mappers[i]!.name;
    for (let j = 0; j < i; j++) {
      if (mappers[j]!.name === name) throw new MapperConfigError(name, 'name', 'two mappers share this name; names must be unique (they are part of event ids)');
    }
  }
}

/** The MapperFailed record of a parked mapper; `visible`: the tables and operations it saw (any list of them). */
export function mapperFailedRecord(
  unit: SourceUnit,
  visible: readonly { readonly table: string; readonly op: string }[],
  context: MapContext,
  mapper: string,
  diagnosis: FailureDiagnosis,
): FailedRecord {
  const metadata = sourceMetadata(unit, visible, context, mapper);
  metadata['failure.type'] = 'MapperFailed';
  // Same identifying parts as the mapper's events, with a marker instead of an ordinal.
  const id =
    unit.kind === 'transaction'
      ? uuidv5(JSON.stringify(['mapper-failed', context.assembler, context.sourceIdentity, unit.commitLsn, unit.xid, mapper]), EVENT_ASSEMBLER_NAMESPACE)
      : uuidv5(
          JSON.stringify(['mapper-failed', context.assembler, unit.snapshotGeneration, unit.table, canonicalKey(unit.change.key), mapper]),
          EVENT_ASSEMBLER_NAMESPACE,
        );
  return Object.freeze({ stream: failedRecordsStream(context.assembler), id, type: 'MapperFailed', data: diagnosis, metadata: Object.freeze(metadata) });
}
