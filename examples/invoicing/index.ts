// The invoicing example's mappers, in the order the assembler runs them, and its reconcilers.
import type { AnyMapper } from '../../src/mapping/index.js';
import { createCustomersMapper, customers } from './mappers/customers.js';
import { createInvoiceImportMapper, invoiceImport } from './mappers/invoice-import.js';
import { createInvoiceLifecycleMapper, invoiceLifecycle } from './mappers/invoice-lifecycle.js';
import { createPaymentsMapper, payments } from './mappers/payments.js';

export { customers, invoiceImport, invoiceLifecycle, payments };
export { createCustomersMapper, createInvoiceImportMapper, createInvoiceLifecycleMapper, createPaymentsMapper };
export { invoicingTables, type InvoicingTableNames } from './mappers/tables.js';
export {
  createCustomerReconciler,
  createInvoiceReconciler,
  createInvoicingReconcilers,
  reconcilers,
  type CustomerState,
  type InvoiceState,
  type InvoicingReconcilers,
} from './reconcilers.js';

/** The example's mappers for its tables in `schema` (where `schema.sql` was applied). Default: `public`. */
export function createInvoicingMappers(schema = 'public'): readonly AnyMapper[] {
  return [createCustomersMapper(schema), createInvoiceLifecycleMapper(schema), createPaymentsMapper(schema), createInvoiceImportMapper(schema)];
}

/** The example's mappers for its tables in `public`. */
export const mappers: readonly AnyMapper[] = [customers, invoiceLifecycle, payments, invoiceImport];
