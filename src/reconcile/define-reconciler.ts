/**
 * A reconciler says how one source table and its entity streams should agree (docs/reconcile.md):
 * which stream holds a row's entity, the state the row implies, and how the entity's events fold
 * into that state. It sits next to the mappers that write those streams, and sees only columns
 * they allowlist (checked by the configuration: a hidden column can never reach a report).
 */

/** An event as the reconciler folds it: as recorded in KurrentDB (no upcasting). */
export interface ReconcileEvent {
  readonly stream: string;
  readonly type: string;
  /** From the `contract` metadata (`Type@version`); `null` when absent. */
  readonly version: number | null;
  readonly data: unknown;
  readonly metadata: Readonly<Record<string, string>>;
}

/** The state an entity has: compared field by field (canonical JSON of each value). */
export type EntityState = Readonly<Record<string, unknown>>;

export interface ReconcilerDefinition<Row extends Record<string, unknown>, State extends EntityState> {
  /** Name in reports and for `--tables`. Default: the table. */
  readonly name?: string;
  /** The source table, schema-qualified (`public.invoice`). It must have a primary key. */
  readonly table: string;
  /**
   * Columns read from the source (with `ORDER BY` the primary key). Each must be allowlisted for
   * the table by one of the assembler's mappers.
   */
  readonly columns: readonly (keyof Row & string)[];
  /** Every stream `stream(row)` names starts with it: the server-side filter of the destination read. */
  readonly streamPrefix: string;
  /** The entity's stream for a source row. */
  stream(row: Row): string;
  /** The state the source row implies (only values the events can carry). */
  expected(row: Row): State;
  /**
   * The entity's state after `event`; `state` is `null` before its first event. Return `state`
   * unchanged for events that do not change what is compared.
   */
  fold(state: State | null, event: ReconcileEvent): State | null;
  /** True when the folded state says the entity was deleted (a delete or purge event). Default: never. */
  deleted?(state: State): boolean;
  /** State fields whose values reports show masked (personal data the events may carry). Default: none. */
  readonly mask?: readonly string[];
}

/** A reconciler as the configuration holds it. */
export interface Reconciler<Row extends Record<string, unknown> = Record<string, unknown>, State extends EntityState = EntityState>
  extends ReconcilerDefinition<Row, State> {
  readonly name: string;
  readonly kind: 'event-assembler.reconciler';
}

/** Any reconciler, whatever its row and state types. */
export type AnyReconciler = Reconciler<any, any>;

const TABLE = /^[A-Za-z_][A-Za-z0-9_$]*\.[A-Za-z_][A-Za-z0-9_$]*$/;

/** Checks the definition's shape (names the field that is wrong) and marks it as a reconciler. */
export function defineReconciler<Row extends Record<string, unknown>, State extends EntityState>(definition: ReconcilerDefinition<Row, State>): Reconciler<Row, State> {
  const where = `defineReconciler(${JSON.stringify(definition?.name ?? definition?.table ?? '?')})`;
  if (typeof definition?.table !== 'string' || !TABLE.test(definition.table)) {
    throw new TypeError(`${where}: table must be schema-qualified, like "public.invoice"; got ${JSON.stringify(definition?.table)}`);
  }
  if (!Array.isArray(definition.columns) || definition.columns.length === 0 || definition.columns.some((c) => typeof c !== 'string' || c === '')) {
    throw new TypeError(`${where}: columns must list at least one column name`);
  }
  if (typeof definition.streamPrefix !== 'string' || definition.streamPrefix === '' || definition.streamPrefix.startsWith('$')) {
    throw new TypeError(`${where}: streamPrefix must be a non-empty prefix of the entity streams (not a system stream), like "invoice-"`);
  }
  for (const fn of ['stream', 'expected', 'fold'] as const) {
    if (typeof definition[fn] !== 'function') throw new TypeError(`${where}: ${fn} must be a function`);
  }
  if (definition.deleted !== undefined && typeof definition.deleted !== 'function') throw new TypeError(`${where}: deleted must be a function when given`);
  return { ...definition, name: definition.name ?? definition.table, kind: 'event-assembler.reconciler' };
}

/** True for a value made by {@link defineReconciler}. */
export function isReconciler(value: unknown): value is AnyReconciler {
  return value !== null && typeof value === 'object' && (value as { kind?: unknown }).kind === 'event-assembler.reconciler';
}
