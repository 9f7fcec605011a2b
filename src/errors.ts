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
  /** The column as it was (`null` when first seen missing). */
  readonly before: { readonly name: string; readonly typeOid: number } | null;
  /** The column as it is now (`null` when dropped/missing). */
  readonly after: { readonly name: string; readonly typeOid: number } | null;
  readonly relationId: number;
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
      SCHEMA_REQUIRED_COLUMN_RETYPED: `changed type from OID ${details.before?.typeOid ?? '?'} to OID ${details.after?.typeOid ?? '?'}`,
      SCHEMA_REQUIRED_COLUMN_MISSING: 'does not exist in the replicated relation',
    }[code];
    super(code, `required column "${details.column}" of ${details.table} ${what}; update the mapper's column declaration (or the schema) before resuming`, details);
    this.table = details.table;
    this.column = details.column;
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
