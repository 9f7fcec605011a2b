// generated — do not edit. Regenerate with: event-assembler contracts gen --dir contracts/invoicing --out examples/invoicing/contracts.generated.ts
// One data type per JSON Schema contract (`<Type>V<N>`), plus the maps below.

// CustomerRegistered v1
/**
 * A customer was registered (insert into customer). Stream: customer-<customerId>. Sensitive columns (email, card_number) never appear here.
 */
export interface CustomerRegisteredV1 {
  /**
   * customer.id
   */
  customerId: string;
  /**
   * customer.name
   */
  name: string;
  /**
   * customer.country
   */
  country: string;
}

// InvoiceDiscarded v1
/**
 * A draft invoice was discarded: its row, with status 'draft', was deleted (drafts have no lines). Stream: invoice-<invoiceId>.
 */
export interface InvoiceDiscardedV1 {
  /**
   * invoice.id of the deleted row
   */
  invoiceId: string;
  /**
   * The commit time of the source transaction that deleted the draft
   */
  discardedAt: string;
}

// InvoiceDrafted v1
/**
 * A draft invoice was created (insert into invoice with status 'draft'). Stream: invoice-<invoiceId>.
 */
export interface InvoiceDraftedV1 {
  /**
   * invoice.id
   */
  invoiceId: string;
  /**
   * invoice.customer_id
   */
  customerId: string;
  /**
   * ISO 4217 currency code (invoice.currency)
   */
  currency: string;
}

// InvoiceImported v1
/**
 * An invoice as read by the initial (or incremental) snapshot of table invoice. Stream: invoice-<invoiceId>.
 */
export interface InvoiceImportedV1 {
  /**
   * invoice.id
   */
  invoiceId: string;
  /**
   * invoice.customer_id
   */
  customerId: string;
  /**
   * invoice.status at snapshot time
   */
  status: 'draft' | 'issued' | 'paid' | 'void';
  /**
   * ISO 4217 currency code (invoice.currency)
   */
  currency: string;
  /**
   * invoice.total as a decimal string with two fraction digits
   */
  total: string;
}

// InvoiceIssued v1
/**
 * An invoice went from 'draft' to 'issued'; its lines were written in the same source transaction. Stream: invoice-<invoiceId>. Superseded by v2 (upcaster v1→v2 in examples/invoicing/upcasters.ts).
 */
export interface InvoiceIssuedV1 {
  /**
   * invoice.id
   */
  invoiceId: string;
  /**
   * invoice.customer_id
   */
  customerId: string;
  /**
   * invoice.number, the human-facing invoice number
   */
  number: string;
  /**
   * ISO 4217 currency code (invoice.currency)
   */
  currency: string;
  /**
   * invoice.total as a decimal string with two fraction digits
   */
  total: string;
  /**
   * invoice.issued_at (ISO-8601 with offset)
   */
  issuedAt: string;
  /**
   * The invoice's lines, ordered by lineNo
   */
  lines: InvoiceIssuedV1Line[];
}
export interface InvoiceIssuedV1Line {
  /**
   * invoice_line.line_no
   */
  lineNo: number;
  /**
   * invoice_line.description
   */
  description: string;
  /**
   * invoice_line.quantity
   */
  quantity: number;
  /**
   * invoice_line.unit_price
   */
  unitPrice: string;
  /**
   * invoice_line.amount
   */
  amount: string;
}

// InvoiceIssued v2
/**
 * An invoice went from 'draft' to 'issued'; its lines were written in the same source transaction. Stream: invoice-<invoiceId>. Breaking change of v1: the currency moved into total, dueDate was added.
 */
export interface InvoiceIssuedV2 {
  /**
   * invoice.id
   */
  invoiceId: string;
  /**
   * invoice.customer_id
   */
  customerId: string;
  /**
   * invoice.number, the human-facing invoice number
   */
  number: string;
  total: InvoiceIssuedV2Money;
  /**
   * invoice.issued_at (ISO-8601 with offset)
   */
  issuedAt: string;
  /**
   * invoice.due_date (ISO-8601 date), null when the invoice has none
   */
  dueDate: string | null;
  /**
   * The invoice's lines, ordered by lineNo
   */
  lines: InvoiceIssuedV2Line[];
}
/**
 * invoice.total in invoice.currency
 */
export interface InvoiceIssuedV2Money {
  /**
   * A money amount as a decimal string with exactly two fraction digits, e.g. "12.50"
   */
  amount: string;
  /**
   * ISO 4217 currency code
   */
  currency: string;
}
export interface InvoiceIssuedV2Line {
  /**
   * invoice_line.line_no
   */
  lineNo: number;
  /**
   * invoice_line.description
   */
  description: string;
  /**
   * invoice_line.quantity
   */
  quantity: number;
  /**
   * invoice_line.unit_price
   */
  unitPrice: string;
  /**
   * invoice_line.amount
   */
  amount: string;
}

// InvoicePaid v1
/**
 * A payment was recorded for an invoice (insert into payment, in the transaction that moves the invoice from 'issued' to 'paid'). Stream: invoice-<invoiceId>.
 */
export interface InvoicePaidV1 {
  /**
   * payment.invoice_id
   */
  invoiceId: string;
  /**
   * payment.id
   */
  paymentId: string;
  /**
   * payment.amount as a decimal string with two fraction digits
   */
  amount: string;
  /**
   * ISO 4217 currency code (payment.currency)
   */
  currency: string;
  /**
   * payment.paid_at (ISO-8601 with offset)
   */
  paidAt: string;
}

// InvoiceVoided v1
/**
 * An invoice's status became 'void'. Stream: invoice-<invoiceId>.
 */
export interface InvoiceVoidedV1 {
  /**
   * invoice.id
   */
  invoiceId: string;
  /**
   * invoice.void_reason, null when none was given
   */
  reason: string | null;
  /**
   * The commit time of the source transaction that voided the invoice
   */
  voidedAt: string;
}

/** Event data type per contract, keyed `type@version`. */
export interface EventContracts {
  'CustomerRegistered@1': CustomerRegisteredV1;
  'InvoiceDiscarded@1': InvoiceDiscardedV1;
  'InvoiceDrafted@1': InvoiceDraftedV1;
  'InvoiceImported@1': InvoiceImportedV1;
  'InvoiceIssued@1': InvoiceIssuedV1;
  'InvoiceIssued@2': InvoiceIssuedV2;
  'InvoicePaid@1': InvoicePaidV1;
  'InvoiceVoided@1': InvoiceVoidedV1;
}

/** Event data type of the latest version of each event type. */
export type LatestEventContracts = {
  CustomerRegistered: CustomerRegisteredV1;
  InvoiceDiscarded: InvoiceDiscardedV1;
  InvoiceDrafted: InvoiceDraftedV1;
  InvoiceImported: InvoiceImportedV1;
  InvoiceIssued: InvoiceIssuedV2;
  InvoicePaid: InvoicePaidV1;
  InvoiceVoided: InvoiceVoidedV1;
};

/** The latest version number of each event type. */
export type LatestEventVersions = {
  CustomerRegistered: 1;
  InvoiceDiscarded: 1;
  InvoiceDrafted: 1;
  InvoiceImported: 1;
  InvoiceIssued: 2;
  InvoicePaid: 1;
  InvoiceVoided: 1;
};
