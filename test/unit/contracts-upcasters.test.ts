import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { invoiceIssuedV1ToV2, invoicingUpcasters } from '../../examples/invoicing/upcasters.js';
import type { InvoiceIssuedV1, InvoiceIssuedV2 } from '../../examples/invoicing/contracts.generated.js';
import { ContractError } from '../../src/contracts/errors.js';
import { loadContractRegistry } from '../../src/contracts/load.js';
import { createContractRegistry, type ContractRegistry } from '../../src/contracts/registry.js';
import { defineUpcaster, missingUpcasters, upcast } from '../../src/contracts/upcasters.js';

const v1: InvoiceIssuedV1 = {
  invoiceId: 'inv_1',
  customerId: 'cus_1',
  number: 'INV-1',
  currency: 'EUR',
  total: '40.00',
  issuedAt: '2026-03-01T09:30:00Z',
  lines: [{ lineNo: 1, description: 'widget', quantity: 2, unitPrice: '20.00', amount: '40.00' }],
};

function thing(version: number, properties: Record<string, unknown>) {
  return {
    source: `Thing.v${version}.schema.json`,
    schema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: `urn:test:Thing:v${version}`,
      title: `Thing v${version}`,
      'x-event-type': 'Thing',
      'x-event-version': version,
      type: 'object',
      additionalProperties: false,
      required: Object.keys(properties),
      properties,
    },
  };
}
const things = createContractRegistry([thing(1, { a: { type: 'string' } }), thing(2, { a: { type: 'string' }, b: { type: 'integer' } }), thing(3, { a: { type: 'string' }, b: { type: 'integer' }, c: { type: 'boolean' } })]);
const oneToTwo = defineUpcaster<{ a: string }, { a: string; b: number }>({ type: 'Thing', from: 1, to: 2, up: (d) => ({ ...d, b: 0 }) });
const twoToThree = defineUpcaster<{ a: string; b: number }, { a: string; b: number; c: boolean }>({ type: 'Thing', from: 2, to: 3, up: (d) => ({ ...d, c: false }) });

function contractError(fn: () => unknown): ContractError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ContractError);
    return error as ContractError;
  }
  throw new Error('expected a ContractError');
}

describe('upcast', () => {
  let registry: ContractRegistry;
  beforeAll(async () => {
    registry = await loadContractRegistry(fileURLToPath(new URL('../../contracts', import.meta.url)));
  });

  it('brings InvoiceIssued v1 to v2: total becomes { amount, currency }, dueDate null, currency dropped', () => {
    const frozen = structuredClone(v1);
    const result = upcast<InvoiceIssuedV2>(registry, invoicingUpcasters, { type: 'InvoiceIssued', version: 1, data: v1 });
    expect(result).toEqual({
      type: 'InvoiceIssued',
      version: 2,
      data: { invoiceId: 'inv_1', customerId: 'cus_1', number: 'INV-1', total: { amount: '40.00', currency: 'EUR' }, issuedAt: '2026-03-01T09:30:00Z', dueDate: null, lines: v1.lines },
    });
    expect(result.data).not.toHaveProperty('currency');
    expect(v1).toEqual(frozen);
  });

  it('returns latest-version data as it is, after validating it', () => {
    const v2 = invoiceIssuedV1ToV2.up(v1);
    expect(upcast(registry, invoicingUpcasters, { type: 'InvoiceIssued', version: 2, data: v2 })).toEqual({ type: 'InvoiceIssued', version: 2, data: v2 });
    const bad = contractError(() => upcast(registry, invoicingUpcasters, { type: 'InvoiceIssued', version: 2, data: { ...v2, dueDate: 'soon' } }));
    expect(bad.code).toBe('UPCAST_RESULT_INVALID');
  });

  it('chains steps v1 → v2 → v3', () => {
    expect(upcast(things, [twoToThree, oneToTwo], { type: 'Thing', version: 1, data: { a: 'x' } })).toEqual({ type: 'Thing', version: 3, data: { a: 'x', b: 0, c: false } });
    expect(upcast(things, [oneToTwo], { type: 'Thing', version: 1, data: { a: 'x' } }, { toVersion: 2 }).data).toEqual({ a: 'x', b: 0 });
  });

  it('names a missing step and how to add it', () => {
    const error = contractError(() => upcast(things, [oneToTwo], { type: 'Thing', version: 1, data: { a: 'x' } }));
    expect(error.code).toBe('UPCASTER_MISSING_STEP');
    expect(error.message).toBe(
      "no upcaster for Thing v2 → v3 (upcasting Thing@1 to v3); define one with defineUpcaster({ type: 'Thing', from: 2, to: 3, up })",
    );
    expect(missingUpcasters(things, [oneToTwo])).toEqual([{ type: 'Thing', from: 2, to: 3 }]);
    expect(missingUpcasters(registry, invoicingUpcasters)).toEqual([]);
    expect(missingUpcasters(registry, [])).toEqual([{ type: 'InvoiceIssued', from: 1, to: 2 }]);
  });

  it('validates the result against the target version', () => {
    const forgetful = defineUpcaster({ type: 'InvoiceIssued', from: 1, to: 2, up: ({ currency: _c, ...rest }: InvoiceIssuedV1) => ({ ...rest, total: { amount: rest.total, currency: 'EUR' } }) });
    const error = contractError(() => upcast(registry, [forgetful], { type: 'InvoiceIssued', version: 1, data: v1 }));
    expect(error.code).toBe('UPCAST_RESULT_INVALID');
    expect(error.details).toMatchObject({ type: 'InvoiceIssued', version: 1, target: 2, violations: [{ path: '/dueDate', keyword: 'required' }] });
  });

  it('refuses bad upcasters and unknown contracts', () => {
    expect(contractError(() => defineUpcaster({ type: 'Thing', from: 1, to: 3, up: (d: unknown) => d })).code).toBe('UPCASTER_INVALID');
    expect(contractError(() => upcast(things, [oneToTwo, oneToTwo], { type: 'Thing', version: 1, data: { a: 'x' } })).message).toContain('two upcasters for Thing v1 → v2');
    expect(contractError(() => upcast(things, [], { type: 'Thing', version: 7, data: {} })).code).toBe('CONTRACT_UNKNOWN');
    expect(contractError(() => upcast(things, [], { type: 'Nope', version: 1, data: {} })).code).toBe('CONTRACT_UNKNOWN');
    expect(contractError(() => upcast(things, [], { type: 'Thing', version: 3, data: {} }, { toVersion: 2 })).message).toBe('cannot upcast Thing@3 down to v2');
  });
});
