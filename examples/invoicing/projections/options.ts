// What the example's projections share: their options, and the one rule that scopes them to a
// run's invoices on a KurrentDB that holds other runs' streams too.
import pg from 'pg';

export interface InvoicingProjectionOptions {
  /**
   * Only invoices whose id starts with `<idPrefix>_` (the workload's `idPrefix`): events of other
   * invoices are received and recorded as applied, with no effect. For a KurrentDB shared by
   * several runs: the kit selects streams by category (`invoice-*`), not by a longer prefix.
   * @default every invoice
   */
  readonly idPrefix?: string;
  /** Events per PostgreSQL transaction. @default 100 (the kit's default) */
  readonly batchSize?: number;
}

/** Whether the projection keeps this invoice (see `idPrefix`). */
export function inScope(options: InvoicingProjectionOptions, invoiceId: string): boolean {
  return options.idPrefix === undefined || invoiceId.startsWith(`${options.idPrefix}_`);
}

/** `"schema".table`, quoted. */
export function tableIn(schema: string, table: string): string {
  return `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)}`;
}
