import assert from 'node:assert/strict';
import type {
  Change,
  ColumnDefinition,
  DeleteChange,
  InsertChange,
  QualifiedTable,
  RelationVersion,
  ReplicaIdentity,
  Row,
  SnapshotRecord,
  SourceTransaction,
  SourceUnit,
  UpdateChange,
} from '../source/types.js';
import type { AnyMapper } from '../mapping/define-mapper.js';
import { mapUnit, type EventToAppend, type MapContext, type MapResult } from '../mapping/map-unit.js';
import { MapperError, MapperOutputError, MapperPurityError } from '../mapping/mapper-error.js';
import { checkMapperPurity } from '../mapping/purity.js';

/**
 * The mapper test kit (`event-assembler/testing`): build source transactions by hand and check
 * what a mapper makes of them — given/when/then, without PostgreSQL or KurrentDB.
 *
 * ```ts
 * mapperSpec(invoiceLifecycle)
 *   .when(transaction([insert('public.invoice', { id: 'inv_1', status: 'draft', … })]))
 *   .then([{ stream: 'invoice-inv_1', type: 'InvoiceDrafted', version: 1, data: { … } }]);
 * ```
 */

/** How the builders describe the table. */
export interface RelationOptions {
  /** Replica identity key columns. Default `['id']` when the row has an `id` column; otherwise required. */
  readonly key?: readonly string[];
  /** Default `'full'` when an update/delete gives non-key old values, else `'default'`. */
  readonly replicaIdentity?: ReplicaIdentity;
}

const TEXT_OID = 25;

function keyColumns(table: string, row: Row, options: RelationOptions | undefined): readonly string[] {
  if (options?.key) return options.key;
  if (Object.prototype.hasOwnProperty.call(row, 'id')) return ['id'];
  throw new TypeError(`${table}: the row has no "id" column; pass { key: [...] } to name its key columns`);
}

function relationId(table: string): number {
  let hash = 2166136261;
  for (const ch of table) hash = Math.imul(hash ^ ch.charCodeAt(0), 16777619) >>> 0;
  return 16384 + (hash % 1_000_000);
}

/** A RelationVersion synthesized from a row's columns (all typed `text`; the mapping stage does not look at types). */
export function relation(table: QualifiedTable, row: Row, options?: RelationOptions & { readonly key: readonly string[] }): RelationVersion {
  const [schema, name] = table.includes('.') ? (table.split('.', 2) as [string, string]) : ['public', table];
  const key = options?.key ?? keyColumns(table, row, options);
  const names = [...new Set([...key, ...Object.keys(row)])];
  const columns: ColumnDefinition[] = names.map((column) => ({ name: column, typeOid: TEXT_OID, typeName: 'text', typeModifier: -1, isKey: key.includes(column) }));
  return { relationId: relationId(table), table, schema, name, replicaIdentity: options?.replicaIdentity ?? 'default', columns, version: 1 };
}

function pickKey(row: Row, key: readonly string[]): Row {
  return Object.fromEntries(key.map((column) => [column, row[column]]));
}

export function insert(table: QualifiedTable, row: Row, options?: RelationOptions): InsertChange {
  const key = keyColumns(table, row, options);
  return { op: 'insert', table, relation: relation(table, row, { ...options, key }), after: row, key: pickKey(row, key) };
}

/**
 * An update. `before` is the old tuple as PostgreSQL would send it: the full old row
 * (REPLICA IDENTITY FULL), only key columns, or `null` (default identity, key unchanged).
 */
export function update(table: QualifiedTable, before: Row | null, after: Row, options?: RelationOptions): UpdateChange {
  const key = keyColumns(table, after, options);
  const newKey = pickKey(after, key);
  const keyChanged = before !== null && key.some((c) => Object.prototype.hasOwnProperty.call(before, c) && before[c] !== after[c]);
  const full = before !== null && Object.keys(before).some((c) => !key.includes(c));
  return {
    op: 'update',
    table,
    relation: relation(table, after, { ...options, key, replicaIdentity: options?.replicaIdentity ?? (full ? 'full' : 'default') }),
    before,
    after,
    key: newKey,
    oldKey: keyChanged && before ? pickKey(before, key) : null,
  };
}

/** A delete. `before` is the old row (all columns with REPLICA IDENTITY FULL, else the key). */
export function del(table: QualifiedTable, before: Row, options?: RelationOptions): DeleteChange {
  const key = keyColumns(table, before, options);
  const full = Object.keys(before).some((c) => !key.includes(c));
  return {
    op: 'delete',
    table,
    relation: relation(table, before, { ...options, key, replicaIdentity: options?.replicaIdentity ?? (full ? 'full' : 'default') }),
    before,
    key: pickKey(before, key),
  };
}

export interface TransactionOptions {
  /** Default `0/16B3748`. */
  readonly commitLsn?: string;
  /** Default 1000. */
  readonly xid?: number;
  /** Default `2026-01-15T10:00:00.000000Z`. */
  readonly commitTime?: string;
  /** Default: the commit LSN. */
  readonly endLsn?: string;
  /** Default `7000000000000000001`. */
  readonly systemId?: string;
  /** Default `event_assembler`. */
  readonly slot?: string;
  /** Default 1. */
  readonly timeline?: number;
}

/** One committed transaction of `changes`. Positions default to fixed values, so tests are repeatable. */
export function transaction(changes: readonly Change[], options: TransactionOptions = {}): SourceTransaction {
  const commitLsn = options.commitLsn ?? '0/16B3748';
  const xid = options.xid ?? 1000;
  const systemId = options.systemId ?? '7000000000000000001';
  const slot = options.slot ?? 'event_assembler';
  const timeline = options.timeline ?? 1;
  return {
    kind: 'transaction',
    xid,
    commitLsn,
    endLsn: options.endLsn ?? commitLsn,
    commitTime: options.commitTime ?? '2026-01-15T10:00:00.000000Z',
    origin: null,
    // The checkpoint is opaque outside source/; tests only need it stable and distinct.
    position: { systemId, timeline, slot, commitLsn, xid, checkpoint: `test:${systemId}:${timeline}:${slot}:${commitLsn}:${xid}` },
    changes,
  };
}

/** One snapshot record (`op: 'read'`) of `row` in snapshot `generation`. */
export function snapshotRecord(table: QualifiedTable, row: Row, options: RelationOptions & { readonly generation?: string } = {}): SnapshotRecord {
  const generation = options.generation ?? 'g1';
  const key = pickKey(row, keyColumns(table, row, options));
  return { kind: 'snapshot', snapshotGeneration: generation, table, change: { op: 'read', table, after: row, key, snapshotGeneration: generation } };
}

/** What `then` compares: `metadata` only when given, and then only the keys given. */
export interface ExpectedEvent {
  readonly stream: string;
  readonly type: string;
  readonly version: number;
  readonly data: unknown;
  readonly metadata?: Readonly<Record<string, string>>;
}

export interface MapperSpecOptions {
  /** Run the mapper twice and fail on any difference (see `checkMapperPurity`). Default true. */
  readonly checkPurity?: boolean;
}

export interface MapperSpecWhen {
  /** The mapper produced exactly `expected` (in order), and nothing failed. Returns the full result. */
  then(expected: readonly ExpectedEvent[]): MapResult;
  /** The mapper produced no event and nothing failed. */
  thenNothing(): MapResult;
  /**
   * The mapper fails on this input (run with the `halt` policy whatever its own): the
   * `MapperError`'s message (which includes the cause's) matches `expected` when given.
   */
  thenThrows(expected?: string | RegExp | ((error: MapperError) => boolean)): MapperError;
}

export interface MapperSpec {
  /** The map context (assembler name, source identity). Default `{ assembler: 'test', sourceIdentity: '7000000000000000001' }`. */
  given(context: Partial<MapContext>): MapperSpec;
  /** A source unit, or the changes of one transaction (wrapped with `transaction()`'s defaults). */
  when(input: SourceUnit | readonly Change[]): MapperSpecWhen;
}

const DEFAULT_CONTEXT: MapContext = { assembler: 'test', sourceIdentity: '7000000000000000001' };

function project(event: EventToAppend, expected: ExpectedEvent | undefined): ExpectedEvent {
  const base = { stream: event.stream, type: event.type, version: event.version, data: event.data };
  if (!expected?.metadata) return base;
  const metadata = Object.fromEntries(Object.keys(expected.metadata).map((k) => [k, event.metadata[k]])) as Record<string, string>;
  return { ...base, metadata };
}

function normalize(expected: ExpectedEvent): ExpectedEvent {
  const { stream, type, version, data, metadata } = expected;
  return metadata ? { stream, type, version, data, metadata } : { stream, type, version, data };
}

/** The MapperError of `mapper` on `unit` when its output is invalid (a MapperOutputError), else undefined. */
function invalidOutput(mapper: AnyMapper, unit: SourceUnit, context: MapContext): MapperError | undefined {
  try {
    mapUnit([{ ...mapper, onError: 'halt' }], unit, context);
  } catch (error) {
    if (error instanceof MapperError && error.cause instanceof MapperOutputError) return error;
  }
  return undefined;
}

export function mapperSpec(mapper: AnyMapper, options: MapperSpecOptions = {}, context: MapContext = DEFAULT_CONTEXT): MapperSpec {
  return {
    given: (overrides) => mapperSpec(mapper, options, { ...context, ...overrides }),
    when(input) {
      const unit: SourceUnit = Array.isArray(input) ? transaction(input as readonly Change[]) : (input as SourceUnit);
      const succeed = (): MapResult => {
        if (options.checkPurity ?? true) {
          try {
            checkMapperPurity(mapper, unit);
          } catch (error) {
            // A mapper that fails alike in both runs is pure; mapUnit below reports its failure.
            // An invalid event (a function, a new symbol) differs between runs too: its
            // MapperOutputError, as the pipeline would report it, says more than the difference.
            if (error instanceof MapperPurityError) throw invalidOutput(mapper, unit, context) ?? error;
          }
        }
        const result = mapUnit([mapper], unit, context);
        if (result.failed.length > 0) {
          const record = result.failed[0]!;
          const cause = (record.data as { cause?: { message?: string } }).cause?.message ?? '';
          assert.fail(`expected events, but mapper "${mapper.name}" failed (parked): ${cause}`);
        }
        return result;
      };
      return {
        then(expected) {
          const result = succeed();
          assert.deepStrictEqual(
            result.events.map((e, i) => project(e, expected[i])),
            expected.map(normalize),
          );
          return result;
        },
        thenNothing() {
          const result = succeed();
          assert.deepStrictEqual(result.events.map((e) => project(e, undefined)), [], `expected no events from mapper "${mapper.name}"`);
          return result;
        },
        thenThrows(expected) {
          let caught: unknown;
          try {
            mapUnit([{ ...mapper, onError: 'halt' }], unit, context);
          } catch (error) {
            caught = error;
          }
          if (!(caught instanceof MapperError)) {
            if (caught === undefined) assert.fail(`expected mapper "${mapper.name}" to throw, but it returned events`);
            throw caught;
          }
          if (typeof expected === 'string') assert.ok(caught.message.includes(expected), `expected the error to mention ${JSON.stringify(expected)}, got: ${caught.message}`);
          else if (expected instanceof RegExp) assert.match(caught.message, expected);
          else if (expected) assert.ok(expected(caught), `the error did not satisfy the predicate: ${caught.message}`);
          return caught;
        },
      };
    },
  };
}
