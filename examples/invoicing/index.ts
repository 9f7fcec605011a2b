// The invoicing example's mappers, in the order the assembler runs them.
import type { AnyMapper } from '../../src/mapping/index.js';
import { customers } from './mappers/customers.js';
import { invoiceImport } from './mappers/invoice-import.js';
import { invoiceLifecycle } from './mappers/invoice-lifecycle.js';
import { payments } from './mappers/payments.js';

export { customers, invoiceImport, invoiceLifecycle, payments };

export const mappers: readonly AnyMapper[] = [customers, invoiceLifecycle, payments, invoiceImport];
