// Upcasters of the invoicing domain: stored events of older contract versions, read as the latest.
import { defineUpcaster, type Upcaster } from '../../src/contracts/upcasters.js';
import type { InvoiceIssuedV1, InvoiceIssuedV2 } from './contracts.generated.js';

/**
 * InvoiceIssued v1 → v2: the currency moved into `total: { amount, currency }`; v1 knew no due
 * date, so `dueDate` is null (not invented).
 */
export const invoiceIssuedV1ToV2 = defineUpcaster<InvoiceIssuedV1, InvoiceIssuedV2>({
  type: 'InvoiceIssued',
  from: 1,
  to: 2,
  up: ({ currency, total, ...rest }) => ({ ...rest, total: { amount: total, currency }, dueDate: null }),
});

/** Every upcaster of the domain; pass to `upcast(registry, invoicingUpcasters, event)`. */
export const invoicingUpcasters: readonly Upcaster[] = [invoiceIssuedV1ToV2];
