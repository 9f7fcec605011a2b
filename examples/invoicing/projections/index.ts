// The invoicing example's projections, through the consumer kit (src/consumer, docs/consumers.md).
import type { Projection } from '../../../src/consumer/index.js';
import type { LatestEventContracts } from '../contracts.generated.js';
import { createCustomerSummaryProjection } from './customer-summary.js';
import { createInvoicesProjection } from './invoices.js';
import type { InvoicingProjectionOptions } from './options.js';

export { createInvoicesProjection, INVOICES_TABLE } from './invoices.js';
export { createCustomerSummaryProjection, CUSTOMER_SUMMARY_TABLE, CUSTOMER_SUMMARY_INVOICES_TABLE } from './customer-summary.js';
export type { InvoicingProjectionOptions } from './options.js';

/** Both projections: `invoices` and `customerSummary` (named `customer-summary` in the kit's state). */
export function createInvoicingProjections(options: InvoicingProjectionOptions = {}): { invoices: Projection<LatestEventContracts>; customerSummary: Projection<LatestEventContracts> } {
  return { invoices: createInvoicesProjection(options), customerSummary: createCustomerSummaryProjection(options) };
}
