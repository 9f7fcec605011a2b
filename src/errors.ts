/**
 * One base error with a stable machine-readable `code` and the context to act on it
 * (`details`: position, table, key, column, …). Each failure kind gets a small subclass;
 * driver errors are translated into these at the adapter boundary.
 */
export class EventAssemblerError extends Error {
  /** Stable code, e.g. `SCHEMA_REQUIRED_COLUMN_DROPPED`. Never reworded once published. */
  readonly code: string;
  /** Context to act on; subclasses declare its precise shape (`declare readonly details: …`). */
  readonly details: object;

  constructor(code: string, message: string, details: object = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
}

export type SchemaChangeErrorCode =
  | 'SCHEMA_REQUIRED_COLUMN_DROPPED'
  | 'SCHEMA_REQUIRED_COLUMN_RENAMED'
  | 'SCHEMA_REQUIRED_COLUMN_RETYPED'
  | 'SCHEMA_REQUIRED_COLUMN_MISSING';

export interface SchemaChangeErrorDetails {
  readonly table: string;
  readonly column: string;
  /** The column as it was (`null` when first seen missing); `typeName` when PostgreSQL named the type. */
  readonly before: { readonly name: string; readonly typeOid: number; readonly typeName?: string } | null;
  /** The column as it is now (`null` when dropped/missing). */
  readonly after: { readonly name: string; readonly typeOid: number; readonly typeName?: string } | null;
  readonly relationId: number;
  /**
   * The mappers that allowlist the column, added by the pipeline (the source knows columns, not
   * mappers). Empty when only `source.tables[].requiredColumns` asks for it; absent when unknown.
   */
  readonly mappers?: readonly string[];
}

function typeLabel(column: { readonly typeOid: number; readonly typeName?: string } | null): string {
  if (column === null) return '?';
  return column.typeName === undefined ? `OID ${column.typeOid}` : `${column.typeName} (OID ${column.typeOid})`;
}

/** What to do about each kind of change, naming the mappers when they are known. */
function schemaChangeFix(code: SchemaChangeErrorCode, details: SchemaChangeErrorDetails): string {
  const names = details.mappers;
  const declaration = names === undefined ? "the mapper's columns" : names.length === 0 ? 'source.tables[].requiredColumns' : `the columns of mapper ${names.join(', ')}`;
  switch (code) {
    case 'SCHEMA_REQUIRED_COLUMN_RENAMED':
      return `allowlist "${details.after?.name ?? '?'}" instead of "${details.column}" in ${declaration} (and read it under that name), then start again`;
    case 'SCHEMA_REQUIRED_COLUMN_DROPPED':
    case 'SCHEMA_REQUIRED_COLUMN_MISSING':
      return `remove "${details.column}" from ${declaration} (and whatever is made of it) or restore the column, then start again`;
    case 'SCHEMA_REQUIRED_COLUMN_RETYPED':
      return `check that the events made from it still match their contracts, then start again: a restart takes the new type as known, and every event is still validated against its contract`;
  }
}

/** A Relation message changed (or lacks) a column that a consumer declared it needs. */
export class SchemaChangeError extends EventAssemblerError {
  declare readonly code: SchemaChangeErrorCode;
  declare readonly details: SchemaChangeErrorDetails;
  readonly table: string;
  readonly column: string;

  constructor(code: SchemaChangeErrorCode, details: SchemaChangeErrorDetails) {
    const what = {
      SCHEMA_REQUIRED_COLUMN_DROPPED: 'was dropped',
      SCHEMA_REQUIRED_COLUMN_RENAMED: `was renamed to "${details.after?.name ?? '?'}"`,
      SCHEMA_REQUIRED_COLUMN_RETYPED: `changed type from ${typeLabel(details.before)} to ${typeLabel(details.after)}`,
      SCHEMA_REQUIRED_COLUMN_MISSING: 'does not exist in the replicated relation',
    }[code];
    const readBy = details.mappers === undefined ? '' : details.mappers.length === 0 ? ' (required by source.tables)' : ` (allowlisted by mapper ${details.mappers.join(', ')})`;
    super(
      code,
      `required column "${details.column}" of ${details.table}${readBy} ${what}; nothing from the transaction that showed it was delivered, and the slot is not acknowledged past it. Fix: ${schemaChangeFix(code, details)}`,
      details,
    );
    this.table = details.table;
    this.column = details.column;
  }
}

/** What {@link TableRenamedError} carries. */
export interface TableRenamedErrorDetails {
  /** The captured name the table had (`schema.table`). */
  readonly from: string;
  /** The name pgoutput now describes the same relation (OID) by. */
  readonly to: string;
  readonly relationId: number;
  /** The mappers that read the table under its old name, added by the pipeline; absent when unknown. */
  readonly mappers?: readonly string[];
}

/**
 * A captured table was renamed (or moved to another schema) while streaming. Its changes would
 * now carry a name no mapper reads, and would pass through without an event — so the line stops
 * before delivering the transaction that showed the new name.
 */
export class TableRenamedError extends EventAssemblerError {
  declare readonly code: 'SCHEMA_CAPTURED_TABLE_RENAMED';
  declare readonly details: TableRenamedErrorDetails;

  constructor(details: TableRenamedErrorDetails) {
    const readBy = details.mappers === undefined || details.mappers.length === 0 ? '' : ` (read by mapper ${details.mappers.join(', ')})`;
    const where = details.mappers === undefined || details.mappers.length === 0 ? 'source.tables' : `source.tables (if listed) and the tables of mapper ${details.mappers.join(', ')}`;
    super(
      'SCHEMA_CAPTURED_TABLE_RENAMED',
      `captured table ${details.from}${readBy} was renamed to ${details.to} (relation OID ${details.relationId}); its changes would reach no mapper, so nothing from the transaction that showed it was delivered, and the slot is not acknowledged past it. ` +
        `Fix: name it "${details.to}" in ${where} (and in the reconcilers), deploy, then start again — or rename the table back`,
      details,
    );
  }
}

/** A pgoutput payload could not be decoded (truncated, unknown tag, bad tuple kind). */
export class PgoutputDecodeError extends EventAssemblerError {
  constructor(message: string, details: Readonly<Record<string, unknown>> = {}) {
    super('PGOUTPUT_DECODE_FAILED', message, details);
  }
}

/** The stream violated the protocol's ordering (e.g. a change outside a transaction, an unknown relation id). */
export class ProtocolStateError extends EventAssemblerError {
  constructor(message: string, details: Readonly<Record<string, unknown>> = {}) {
    super('PGOUTPUT_PROTOCOL_STATE', message, details);
  }
}
