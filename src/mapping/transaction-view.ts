import { isUnchangedToast, type QualifiedTable, type Row, type SourcePosition, type SourceUnit } from '../source/types.js';
import { declaredChanges, eachDeclared, truncatedTables, visibleChange, type DeclaredChange, type DeclaredUnit, type VisibleChange } from './allowlist.js';
import { MapperUsageError } from './mapper-error.js';
import type { ChangeView, TableAllowlist, Transaction } from './types.js';
import { valuesEqual } from './values.js';

export { isUnchangedToast };
// The view types live in types.ts; re-exported for modules that import them from here.
export type { ChangeTransaction, ChangeView, DeleteView, InsertView, OneOf, ReadView, SnapshotTransaction, Transaction, UpdateView } from './types.js';

function matchesOne(value: unknown, expected: unknown): boolean {
  return Array.isArray(expected) ? expected.some((e) => valuesEqual(value, e)) : valuesEqual(value, expected);
}

function requireAllowlisted(change: VisibleChange, column: string): void {
  if (!change.allow.columns.includes(column)) {
    throw new MapperUsageError(`column "${column}" of ${change.table} is not allowlisted; add it to tables['${change.table}'].columns`, {
      table: change.table,
      column,
    });
  }
}

function oldValue(change: VisibleChange, column: string): unknown {
  const before = change.allow.before;
  const declared = Array.isArray(before) ? before.includes(column) : before === 'key' && Object.prototype.hasOwnProperty.call(change.key, column);
  if (!declared) {
    throw new MapperUsageError(
      `the old value of "${column}" of ${change.table} is not declared; add it to tables['${change.table}'].before (non-key columns need REPLICA IDENTITY FULL)`,
      { table: change.table, column },
    );
  }
  if (!change.before || !Object.prototype.hasOwnProperty.call(change.before, column)) {
    throw new MapperUsageError(
      `PostgreSQL sent no old value of "${column}" for this ${change.op} of ${change.table}; the table needs REPLICA IDENTITY FULL`,
      { table: change.table, column, op: change.op },
    );
  }
  return change.before[column];
}

/**
 * One change as the mapper sees it. A class (methods on the prototype) rather than closures:
 * views are built for every change of every transaction, which made them the top of the profile.
 */
class ChangeViewImpl {
  readonly op: VisibleChange['op'];
  readonly table: QualifiedTable;
  readonly index: number;
  readonly key: Row;
  readonly oldKey: Row | null;
  readonly after: Row | null;
  readonly before: Row | null;
  readonly #change: VisibleChange;

  constructor(change: VisibleChange) {
    this.op = change.op;
    this.table = change.table;
    this.index = change.index;
    this.key = change.key;
    this.oldKey = change.oldKey;
    this.after = change.after;
    this.before = change.before;
    this.#change = change;
    Object.freeze(this);
  }

  changed(column: string): boolean {
    const change = this.#change;
    requireAllowlisted(change, column);
    if (change.op === 'insert' || change.op === 'delete') return true;
    if (change.op === 'read') return false;
    const now = change.after?.[column];
    if (isUnchangedToast(now)) return false;
    return !valuesEqual(oldValue(change, column), now);
  }

  changedTo(column: string, value: unknown): boolean {
    const change = this.#change;
    if (change.op !== 'insert' && change.op !== 'update') return false;
    return this.changed(column) && matchesOne(change.after?.[column], value);
  }

  changedFrom(column: string, from: unknown): { to(value: unknown): boolean } {
    const change = this.#change;
    return Object.freeze({
      to: (value: unknown): boolean => {
        if (change.op !== 'update') return false;
        return this.changed(column) && matchesOne(oldValue(change, column), from) && matchesOne(change.after?.[column], value);
      },
    });
  }
}

const EMPTY: readonly never[] = Object.freeze([]);

/**
 * The transaction a mapper receives (see `Transaction`): methods on the prototype, lists built on
 * demand, and each change through the allowlist only when the mapper first looks at it. The
 * declared changes are given (a transaction in memory) or listed on first need (a large one,
 * read from disk); `each()` of a large one lists nothing.
 */
class TransactionViewImpl {
  readonly isSnapshot: boolean;
  readonly snapshotGeneration: string | null;
  readonly commitTime: string | null;
  readonly position: SourcePosition | null;
  readonly xid: number | null;
  readonly commitLsn: string | null;
  readonly #unit: SourceUnit;
  #changes: readonly DeclaredChange[] | undefined;
  /** Views made so far, by position in `#changes`. */
  #made: (ChangeView | undefined)[] | undefined;
  #all: readonly ChangeView[] | undefined;
  #tables: readonly QualifiedTable[] | undefined;
  readonly #declared: Readonly<Record<QualifiedTable, TableAllowlist>>;
  #truncated: readonly QualifiedTable[] | undefined;

  constructor(unit: SourceUnit, declared: DeclaredUnit | null, tables: Readonly<Record<QualifiedTable, TableAllowlist>>) {
    this.#unit = unit;
    this.#changes = declared?.changes;
    this.#truncated = declared?.truncated;
    this.#declared = tables;
    if (unit.kind === 'snapshot') {
      this.isSnapshot = true;
      this.snapshotGeneration = unit.snapshotGeneration;
      this.commitTime = null;
      this.position = null;
      this.xid = null;
      this.commitLsn = null;
    } else {
      this.isSnapshot = false;
      this.snapshotGeneration = null;
      this.commitTime = unit.commitTime;
      this.position = unit.position;
      this.xid = unit.xid;
      this.commitLsn = unit.commitLsn;
    }
    Object.freeze(this);
  }

  /** Tables with visible changes, in first-seen order. */
  get tables(): readonly QualifiedTable[] {
    if (this.#tables) return this.#tables;
    const names: QualifiedTable[] = [];
    for (const c of this.#changes ?? eachDeclared(this.#unit, this.#declared)) if (!names.includes(c.table)) names.push(c.table);
    return (this.#tables = Object.freeze(names));
  }

  #list(): readonly DeclaredChange[] {
    if (this.#changes) return this.#changes;
    const declared = declaredChanges(this.#unit, this.#declared);
    this.#truncated = declared.truncated;
    return (this.#changes = declared.changes);
  }

  #view(i: number): ChangeView {
    const made = (this.#made ??= new Array<ChangeView | undefined>(this.#list().length));
    return (made[i] ??= new ChangeViewImpl(visibleChange(this.#changes![i]!)) as unknown as ChangeView);
  }

  /** Views of the changes that pass `test` (on table and operation only), in order. */
  #where(test: (change: DeclaredChange) => boolean): ChangeView[] {
    const out: ChangeView[] = [];
    const changes = this.#list();
    for (let i = 0; i < changes.length; i++) if (test(changes[i]!)) out.push(this.#view(i));
    return out;
  }

  #assertDeclared(table: string): void {
    if (!this.#declared[table]) {
      throw new MapperUsageError(`table ${table} is not declared by this mapper; add it to tables`, { table });
    }
  }

  #ofOp(table: string, op: ChangeView['op']): readonly ChangeView[] {
    const out = this.#where((c) => c.table === table && c.op === op);
    return out.length === 0 ? EMPTY : Object.freeze(out);
  }

  changes(table?: string): readonly ChangeView[] {
    if (table === undefined) return (this.#all ??= Object.freeze(this.#where(() => true)));
    this.#assertDeclared(table);
    return Object.freeze(this.#where((c) => c.table === table));
  }

  each(table?: string): Iterable<ChangeView> {
    if (table !== undefined) this.#assertDeclared(table);
    // An iterable (not a one-shot iterator): a mapper may go over it more than once.
    const listed = this.#changes;
    if (listed) {
      // Listed already (a transaction in memory): the views it made are reused.
      const view = (i: number): ChangeView => this.#view(i);
      return {
        *[Symbol.iterator]() {
          for (let i = 0; i < listed.length; i++) if (table === undefined || listed[i]!.table === table) yield view(i);
        },
      };
    }
    const unit = this.#unit;
    const declared = this.#declared;
    return {
      *[Symbol.iterator]() {
        for (const c of eachDeclared(unit, declared)) if (table === undefined || c.table === table) yield new ChangeViewImpl(visibleChange(c)) as unknown as ChangeView;
      },
    };
  }

  inserts(table: string): readonly ChangeView[] {
    this.#assertDeclared(table);
    return this.#ofOp(table, 'insert');
  }

  updates(table: string): readonly ChangeView[] {
    this.#assertDeclared(table);
    return this.#ofOp(table, 'update');
  }

  deletes(table: string): readonly ChangeView[] {
    this.#assertDeclared(table);
    return this.#ofOp(table, 'delete');
  }

  reads(table: string): readonly ChangeView[] {
    this.#assertDeclared(table);
    return this.#ofOp(table, 'read');
  }

  rows(table: string, where?: Row | ((row: Row) => boolean)): readonly Row[] {
    this.#assertDeclared(table);
    const all: Row[] = [];
    for (const v of this.#where((c) => c.table === table)) if (v.after !== null) all.push(v.after as Row);
    if (where === undefined) return Object.freeze(all);
    if (typeof where === 'function') return Object.freeze(all.filter(where));
    const entries = Object.entries(where);
    for (const [column] of entries) requireAllowlisted({ allow: this.#declared[table]!, table } as VisibleChange, column);
    return Object.freeze(all.filter((row) => entries.every(([column, value]) => valuesEqual(row[column], value))));
  }

  related(table: string, byColumns: Row): readonly Row[] {
    return this.rows(table, byColumns);
  }

  transitions(table: string, column: string, from: unknown, to: unknown): readonly ChangeView[] {
    this.#assertDeclared(table);
    return Object.freeze(this.#ofOp(table, 'update').filter((v) => v.changedFrom(column as never, from as never).to(to as never)));
  }

  truncated(table: string): boolean {
    return (this.#truncated ??= truncatedTables(this.#unit, this.#declared)).includes(table);
  }
}

/**
 * Builds the view a mapper receives: `unit` filtered through the mapper's allowlist (change by
 * change, as the mapper reads them). `isEmpty` tells the caller that nothing the mapper declared
 * is in the unit (the mapper is then not called); `declared` lists the changes the view holds,
 * and `visible` the same changes filtered (made on first use: diagnosis of a failure).
 */
export function createTransactionView<DB = Record<string, Row>>(
  unit: SourceUnit,
  tables: Readonly<Record<QualifiedTable, TableAllowlist>>,
): { readonly tx: Transaction<DB>; readonly isEmpty: boolean; readonly declared: readonly DeclaredChange[]; readonly visible: readonly VisibleChange[] } {
  const declared = declaredChanges(unit, tables);
  return new CreatedView<DB>(new TransactionViewImpl(unit, declared, tables) as unknown as Transaction<DB>, declared);
}

/**
 * The view of a large transaction (its `changes` a sequence read from disk): nothing is listed
 * until the mapper asks for a list; `tx.each()` streams. The caller has checked that the mapper
 * declares something in the unit.
 */
export function createStreamingView<DB = Record<string, Row>>(unit: SourceUnit, tables: Readonly<Record<QualifiedTable, TableAllowlist>>): Transaction<DB> {
  return new TransactionViewImpl(unit, null, tables) as unknown as Transaction<DB>;
}

/** What `createTransactionView` returns (a class: one per mapper and transaction, `visible` made only when asked). */
class CreatedView<DB> {
  readonly isEmpty: boolean;
  readonly declared: readonly DeclaredChange[];
  #visible: readonly VisibleChange[] | undefined;

  constructor(
    readonly tx: Transaction<DB>,
    unit: DeclaredUnit,
  ) {
    this.isEmpty = unit.changes.length === 0 && unit.truncated.length === 0;
    this.declared = unit.changes;
  }

  get visible(): readonly VisibleChange[] {
    return (this.#visible ??= this.declared.map(visibleChange));
  }
}
