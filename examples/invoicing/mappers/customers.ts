import { defineMapper } from '../../../src/mapping/index.js';
import { declareTable, invoicingTables } from './tables.js';
import type { EventContracts, InvoicingTables } from './types.js';

/** CustomerRegistered v1 for each new customer, from the tables in `schema`. Never sees `email` or `card_number`. */
export function createCustomersMapper(schema = 'public') {
  const { customer } = invoicingTables(schema);
  return defineMapper<EventContracts, InvoicingTables>({
    name: 'customers',
    tables: declareTable(customer, { columns: ['id', 'name', 'country'] }),
    map: (tx) =>
      tx.inserts(customer).map(({ after: row }) => ({
        stream: `customer-${row.id}`,
        type: 'CustomerRegistered',
        version: 1,
        data: { customerId: row.id, name: row.name, country: row.country },
      })),
  });
}

/** The customers mapper for the tables in `public`. */
export const customers = createCustomersMapper();
