/**
 * Where the example's tables live. `schema.sql` names no schema: applied as it is, it creates
 * the tables in `public`; applied with a `search_path` (the demo does that on your server), in
 * another schema. The mappers are made for one schema by their factories; the rows are the same
 * in every schema, so `InvoicingTables` keys them by `<any schema>.<table>`.
 */
import type { TableDeclaration } from '../../../src/mapping/index.js';
import type { InvoicingTables } from './types.js';

/** The example's schema-qualified table names. */
export interface InvoicingTableNames {
  readonly customer: `${string}.customer`;
  readonly invoice: `${string}.invoice`;
  readonly invoiceLine: `${string}.invoice_line`;
  readonly payment: `${string}.payment`;
}

/** The example's tables in `schema`. Default: `public`. */
export function invoicingTables(schema = 'public'): InvoicingTableNames {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new RangeError(`invoicing example: schema must be a lower-case SQL identifier (letters, digits, _), got ${JSON.stringify(schema)}`);
  return { customer: `${schema}.customer`, invoice: `${schema}.invoice`, invoiceLine: `${schema}.invoice_line`, payment: `${schema}.payment` };
}

/**
 * `{ [name]: declaration }`, the declaration checked against the table's row type (its columns
 * can only name the row's allowlistable fields). A mapper's `tables` spreads one per table: an
 * object literal with several computed keys would widen them to `string` and lose the row types.
 */
export function declareTable<T extends keyof InvoicingTables & string>(name: T, declaration: TableDeclaration<InvoicingTables[T]>): { readonly [K in T]: TableDeclaration<InvoicingTables[T]> } {
  return { [name]: declaration } as { readonly [K in T]: TableDeclaration<InvoicingTables[T]> };
}
