import { defineMapper } from '../../../src/mapping/index.js';
import type { EventContracts, InvoicingTables } from './types.js';

/** CustomerRegistered v1 for each new customer. Never sees `email` or `card_number`. */
export const customers = defineMapper<EventContracts, InvoicingTables>({
  name: 'customers',
  tables: {
    'public.customer': { columns: ['id', 'name', 'country'] },
  },
  map: (tx) =>
    tx.inserts('public.customer').map(({ after: customer }) => ({
      stream: `customer-${customer.id}`,
      type: 'CustomerRegistered',
      version: 1,
      data: { customerId: customer.id, name: customer.name, country: customer.country },
    })),
});
