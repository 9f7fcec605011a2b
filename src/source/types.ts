/**
 * The shapes that leave the source stage. Later stages (buffer, mapping, sink) depend on
 * these and on nothing else from `source/`.
 *
 * Three identities stay separate (DESIGN.md): a {@link SourcePosition} says where capture
 * resumes; the entity key is derived by mappers from row values; the event id is derived in
 * `mapping/` from the position plus mapper name and ordinal.
 */

/** A WAL location in PostgreSQL's textual form, e.g. `0/1A2B3C`. */
export type Lsn = string;

/**
 * Marker for a TOASTed column value that did not change in an update and was therefore not
 * sent by pgoutput (tuple data kind `u`). Never confused with `null` or `undefined`.
 */
export const UNCHANGED_TOAST: unique symbol = Symbol.for('event-assembler.unchanged-toast');
export type UnchangedToast = typeof UNCHANGED_TOAST;

export function isUnchangedToast(value: unknown): value is UnchangedToast {
  return value === UNCHANGED_TOAST;
}

/**
 * A decoded row: column name → typed JS value.
 *
 * Value mapping (by column type): int2/int4/oid → number; int8 → bigint; numeric → string
 * (exact); float4/float8 → number; bool → boolean; text/varchar/char/name/enum/uuid → string;
 * json/jsonb → parsed JSON; bytea → Buffer; date → `YYYY-MM-DD`; timestamp → ISO-8601 string
 * without zone and with microseconds; timestamptz → ISO-8601 UTC string with microseconds
 * (`…T10:00:00.123456Z`); time/interval and unknown types → PostgreSQL's text form;
 * arrays → JS arrays of the element mapping; SQL NULL → null; unchanged TOAST → {@link UNCHANGED_TOAST}.
 */
export type Row = Readonly<Record<string, unknown>>;

/** `schema.table`, e.g. `public.invoice`. Always schema-qualified. */
export type QualifiedTable = string;

export type ReplicaIdentity = 'default' | 'nothing' | 'full' | 'index';

export interface ColumnDefinition {
  readonly name: string;
  readonly typeOid: number;
  /** Type name when known (from a Type message or the catalog), e.g. `int4`, `numeric`, `invoice_status`. */
  readonly typeName?: string;
  readonly typeModifier: number;
  /** Part of the replica identity key (pgoutput relation column flag 1). */
  readonly isKey: boolean;
}

/** One version of a table's shape as announced by a pgoutput Relation message. */
export interface RelationVersion {
  readonly relationId: number;
  readonly table: QualifiedTable;
  readonly schema: string;
  readonly name: string;
  readonly replicaIdentity: ReplicaIdentity;
  readonly columns: readonly ColumnDefinition[];
  /** Increments each time the relation's shape changes within this process. */
  readonly version: number;
}

/**
 * Where capture resumes. `checkpoint` is an opaque string that encodes the whole position;
 * it is what gets stored and compared, never parsed outside `source/`.
 */
export interface SourcePosition {
  /** `pg_control` system identifier (from IDENTIFY_SYSTEM), as a decimal string. */
  readonly systemId: string;
  readonly timeline: number;
  readonly slot: string;
  readonly commitLsn: Lsn;
  readonly xid: number;
  readonly checkpoint: string;
}

export interface InsertChange {
  readonly op: 'insert';
  readonly table: QualifiedTable;
  readonly relation: RelationVersion;
  readonly after: Row;
  /** Replica identity key columns of `after`. */
  readonly key: Row;
}

export interface UpdateChange {
  readonly op: 'update';
  readonly table: QualifiedTable;
  readonly relation: RelationVersion;
  /**
   * Old tuple: the full row with REPLICA IDENTITY FULL; only the key columns when the key
   * changed; `null` when the server sent no old tuple.
   */
  readonly before: Row | null;
  readonly after: Row;
  readonly key: Row;
  /** Set when the replica identity key changed: the previous key (so downstream can remove it). */
  readonly oldKey: Row | null;
}

export interface DeleteChange {
  readonly op: 'delete';
  readonly table: QualifiedTable;
  readonly relation: RelationVersion;
  /** The old row: all columns with REPLICA IDENTITY FULL, otherwise key columns only. */
  readonly before: Row;
  readonly key: Row;
}

export interface TruncateChange {
  readonly op: 'truncate';
  readonly tables: readonly QualifiedTable[];
  readonly cascade: boolean;
  readonly restartIdentity: boolean;
}

export interface MessageChange {
  readonly op: 'message';
  readonly prefix: string;
  readonly content: Buffer;
  readonly transactional: boolean;
  readonly lsn: Lsn;
}

/** A relation's shape changed between two Relation messages. Later stages treat it as a contract change. */
export interface SchemaChange {
  readonly op: 'schema';
  readonly table: QualifiedTable;
  readonly previous: RelationVersion | null;
  readonly current: RelationVersion;
  readonly added: readonly string[];
  readonly dropped: readonly string[];
  readonly renamed: readonly { readonly from: string; readonly to: string }[];
  /** Same-named columns whose type OID or type modifier changed (e.g. `varchar(10)` → `varchar(20)` keeps the OID). */
  readonly retyped: readonly {
    readonly column: string; readonly fromType: number; readonly toType: number;
    readonly fromTypeModifier?: number; readonly toTypeModifier?: number;
  }[];
  readonly replicaIdentityChanged: boolean;
}

/** A row read by a snapshot (operation `read`), never confused with a change. */
export interface ReadChange {
  readonly op: 'read';
  readonly table: QualifiedTable;
  readonly after: Row;
  readonly key: Row;
  readonly snapshotGeneration: string;
}

export type RowChange = InsertChange | UpdateChange | DeleteChange;
export type Change = RowChange | TruncateChange | MessageChange | SchemaChange;

/**
 * A transaction's changes in order, iterable as often as needed: an array, or (a large
 * transaction) read back from disk on each iteration, never held whole.
 */
export interface ChangeSequence extends Iterable<Change> {
  readonly length: number;
}

/** One complete, committed source transaction, in commit order. */
export interface SourceTransaction {
  readonly kind: 'transaction';
  readonly xid: number;
  /** LSN of the commit record. */
  readonly commitLsn: Lsn;
  /** End LSN of the transaction: the position to acknowledge once it is durable downstream. */
  readonly endLsn: Lsn;
  /** Commit time, ISO-8601 UTC with microseconds. */
  readonly commitTime: string;
  readonly origin: string | null;
  readonly position: SourcePosition;
  /** The changes in order: an array, or for a large transaction a sequence read from disk on each iteration. */
  readonly changes: ChangeSequence;
}

/** One snapshot row handed to mappers like a transaction of its own. */
export interface SnapshotRecord {
  readonly kind: 'snapshot';
  readonly snapshotGeneration: string;
  /**
   * What the generation is (event metadata `snapshot.kind`): `initial` (the first reading of the
   * tables — it begins the entity streams), `ad_hoc` (a deliberate re-reading: its records re-state
   * current state on purpose). Set by the pipeline; absent for records made outside it.
   */
  readonly snapshotKind?: 'initial' | 'incremental' | 'ad_hoc';
  readonly table: QualifiedTable;
  readonly change: ReadChange;
}

/** What mappers receive: a complete transaction or a snapshot record. */
export type SourceUnit = SourceTransaction | SnapshotRecord;
