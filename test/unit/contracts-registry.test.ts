import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { ContractError } from '../../src/contracts/errors.js';
import { loadContractDocuments } from '../../src/contracts/load.js';
import { createContractRegistry, type ContractRegistry } from '../../src/contracts/registry.js';
import type { ContractDocument } from '../../src/contracts/document.js';

const contractsDir = fileURLToPath(new URL('../../contracts', import.meta.url));

const line = (lineNo: number, extra: Record<string, unknown> = {}) => ({ lineNo, description: `line ${lineNo}`, quantity: 2, unitPrice: '10.00', amount: '20.00', ...extra });
const issuedV2 = (patch: Record<string, unknown> = {}) => ({
  invoiceId: 'inv_1',
  customerId: 'cus_1',
  number: 'INV-1',
  total: { amount: '40.00', currency: 'EUR' },
  issuedAt: '2026-03-01T09:30:00Z',
  dueDate: '2026-03-31',
  lines: [line(1), line(2)],
  ...patch,
});

/** A minimal valid contract document; `patch` overrides root keywords. */
function thing(version: number, patch: Record<string, unknown> = {}): ContractDocument {
  return {
    source: `test/Thing.v${version}.schema.json`,
    schema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: `urn:test:Thing:v${version}`,
      title: `Thing v${version}`,
      'x-event-type': 'Thing',
      'x-event-version': version,
      type: 'object',
      additionalProperties: false,
      required: ['id'],
      properties: { id: { type: 'string' } },
      ...patch,
    },
  };
}

function contractError(fn: () => unknown): ContractError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ContractError);
    return error as ContractError;
  }
  throw new Error('expected a ContractError');
}

describe('contract registry over contracts/invoicing', () => {
  let registry: ContractRegistry;
  beforeAll(async () => {
    registry = createContractRegistry(await loadContractDocuments(contractsDir, { displayDir: 'contracts' }));
  });

  it('keys every contract by type@version, sorted', () => {
    expect(registry.list().map((c) => c.key)).toEqual([
      'CustomerRegistered@1',
      'InvoiceDiscarded@1',
      'InvoiceDrafted@1',
      'InvoiceImported@1',
      'InvoiceIssued@1',
      'InvoiceIssued@2',
      'InvoicePaid@1',
      'InvoiceVoided@1',
    ]);
    expect(registry.get('InvoiceIssued', 2).source).toBe('contracts/invoicing/InvoiceIssued.v2.schema.json');
    expect(registry.has('InvoiceIssued', 3)).toBe(false);
  });

  it('knows the latest version of each type', () => {
    expect(registry.latestVersion('InvoiceIssued')).toBe(2);
    expect(registry.latestVersion('InvoicePaid')).toBe(1);
  });

  it('accepts valid event data', () => {
    expect(registry.validate('InvoiceIssued', 2, issuedV2())).toEqual({ ok: true });
    expect(registry.validate('InvoiceIssued', 2, issuedV2({ dueDate: null, issuedAt: '2026-03-01T11:30:00.5+02:00' }))).toEqual({ ok: true });
    expect(registry.validate('InvoiceVoided', 1, { invoiceId: 'inv_1', reason: null, voidedAt: '2026-03-02T10:00:00Z' })).toEqual({ ok: true });
    expect(registry.validate('InvoiceDiscarded', 1, { invoiceId: 'inv_1', discardedAt: '2026-03-02T10:00:00.000000Z' })).toEqual({ ok: true });
  });

  // Each row: event data, and the violations (JSON pointer into the data + keyword) expected.
  const violations: [string, unknown, { path: string; keyword: string }[]][] = [
    ['extra top-level property', issuedV2({ email: 'a@b.c' }), [{ path: '/email', keyword: 'additionalProperties' }]],
    ['missing required property', (({ dueDate: _d, ...rest }) => rest)(issuedV2()), [{ path: '/dueDate', keyword: 'required' }]],
    ['missing property in an array item', issuedV2({ lines: [line(1), { lineNo: 2, description: 'x', quantity: 1, unitPrice: '1.00' }] }), [{ path: '/lines/1/amount', keyword: 'required' }]],
    ['decimal pattern through $ref', issuedV2({ total: { amount: '12.5', currency: 'EUR' } }), [{ path: '/total/amount', keyword: 'pattern' }]],
    ['date-time with a PostgreSQL-style offset', issuedV2({ issuedAt: '2026-03-01 11:30:00+02' }), [{ path: '/issuedAt', keyword: 'format' }]],
    ['impossible date', issuedV2({ dueDate: '2026-02-30' }), [{ path: '/dueDate', keyword: 'format' }]],
    ['integer in an array item', issuedV2({ lines: [line(1, { quantity: 1.5 })] }), [{ path: '/lines/0/quantity', keyword: 'type' }]],
    [
      'several at once (all reported)',
      issuedV2({ sku: 1, number: '', lines: [line(0)] }),
      [
        { path: '/sku', keyword: 'additionalProperties' },
        { path: '/number', keyword: 'minLength' },
        { path: '/lines/0/lineNo', keyword: 'minimum' },
      ],
    ],
  ];
  it.each(violations)('reports %s', (_name, data, expected) => {
    const result = registry.validate('InvoiceIssued', 2, data);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.violations.map(({ path, keyword }) => ({ path, keyword }))).toEqual(expect.arrayContaining(expected));
    expect(result.violations).toHaveLength(expected.length);
    for (const violation of result.violations) expect(violation.message).not.toBe('');
  });

  it('assertValid throws CONTRACT_VIOLATION carrying the violations', () => {
    const error = contractError(() => registry.assertValid('InvoiceIssued', 2, issuedV2({ email: 'x' })));
    expect(error.code).toBe('CONTRACT_VIOLATION');
    expect(error.message).toContain('/email');
    expect(error.details).toMatchObject({ type: 'InvoiceIssued', version: 2, violations: [{ path: '/email', keyword: 'additionalProperties' }] });
    expect(() => registry.assertValid('InvoiceIssued', 2, issuedV2())).not.toThrow();
  });

  it('refuses an unknown contract with a clear error', () => {
    const unknownVersion = contractError(() => registry.validate('InvoiceIssued', 3, {}));
    expect(unknownVersion.code).toBe('CONTRACT_UNKNOWN');
    expect(unknownVersion.message).toBe('unknown contract InvoiceIssued@3 (known versions of InvoiceIssued: 1, 2)');
    const unknownType = contractError(() => registry.latestVersion('InvoiceShipped'));
    expect(unknownType.code).toBe('CONTRACT_UNKNOWN');
    expect(unknownType.message).toContain('unknown event type "InvoiceShipped"; known types: CustomerRegistered, InvoiceDiscarded, InvoiceDrafted');
  });
});

describe('createContractRegistry refuses bad documents at construction', () => {
  const cases: [string, ContractDocument[], string, RegExp][] = [
    ['missing x-event-type', [thing(1, { 'x-event-type': undefined })], 'CONTRACT_INVALID_DOCUMENT', /"x-event-type" must be/],
    ['version disagreeing with the file name', [{ ...thing(1), source: 'test/Thing.v2.schema.json' }], 'CONTRACT_INVALID_DOCUMENT', /"x-event-version" is 1 but the file name says 2/],
    ['another dialect', [thing(1, { $schema: 'http://json-schema.org/draft-07/schema#' })], 'CONTRACT_INVALID_DOCUMENT', /"\$schema" must be/],
    ['a root that is not an object', [thing(1, { type: 'array' })], 'CONTRACT_INVALID_DOCUMENT', /"type": "object"/],
    ['a keyword typo (strict mode; compiled eagerly)', [thing(1, { requried: ['id'] })], 'CONTRACT_INVALID_DOCUMENT', /schema does not compile: strict mode: unknown keyword: "requried"/],
    ['the same type@version twice', [thing(1), { ...thing(1, { $id: 'urn:test:other' }), source: 'other/Thing.v1.schema.json' }], 'CONTRACT_DUPLICATE', /contract Thing@1 is already defined by test\/Thing.v1.schema.json/],
    ['the same $id twice', [thing(1), thing(2, { $id: 'urn:test:Thing:v1' })], 'CONTRACT_DUPLICATE', /"\$id" urn:test:Thing:v1 is already used/],
  ];
  it.each(cases)('%s', (_name, documents, code, message) => {
    const error = contractError(() => createContractRegistry(documents));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('accepts documents whose source is any label', () => {
    const registry = createContractRegistry([{ ...thing(1), source: 'inline' }]);
    expect(registry.validate('Thing', 1, { id: 'x' })).toEqual({ ok: true });
  });
});
