import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { genCommand } from '../../src/cli/commands/contracts.js';
import { generateContractTypes } from '../../src/contracts/codegen.js';
import { loadContractRegistry } from '../../src/contracts/load.js';
import type { EventContracts, InvoiceIssuedV2, LatestEventContracts } from '../../examples/invoicing/contracts.generated.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const committed = 'examples/invoicing/contracts.generated.ts';
const options = { dir: 'contracts/invoicing', out: committed };

describe('contracts gen', () => {
  it(`${committed} is fresh (regenerate: ${genCommand(options)})`, async () => {
    const registry = await loadContractRegistry(join(root, options.dir));
    const temp = mkdtempSync(join(tmpdir(), 'contracts-gen-'));
    try {
      const file = join(temp, 'contracts.generated.ts');
      writeFileSync(file, await generateContractTypes(registry.list(), { command: genCommand(options) }));
      expect(readFileSync(file, 'utf8')).toBe(readFileSync(join(root, committed), 'utf8'));
    } finally {
      rmSync(temp, { recursive: true, force: true });
    }
  });

  it('is deterministic: input order does not matter', async () => {
    const registry = await loadContractRegistry(join(root, options.dir));
    const forward = await generateContractTypes(registry.list(), { command: 'x' });
    const backward = await generateContractTypes([...registry.list()].reverse(), { command: 'x' });
    expect(backward).toBe(forward);
    expect(forward.startsWith('// generated — do not edit. Regenerate with: x\n')).toBe(true);
    expect(forward).toContain("'InvoiceIssued@1': InvoiceIssuedV1;");
    expect(forward).toContain('  InvoiceIssued: InvoiceIssuedV2;');
  });

  it('types mapper output by type@version (checked by tsc)', () => {
    const v2: EventContracts['InvoiceIssued@2'] = {
      invoiceId: 'inv_1',
      customerId: 'cus_1',
      number: 'INV-1',
      total: { amount: '1.00', currency: 'EUR' },
      issuedAt: '2026-03-01T09:30:00Z',
      dueDate: null,
      lines: [],
    };
    const latest: LatestEventContracts['InvoiceIssued'] = v2 satisfies InvoiceIssuedV2;
    // @ts-expect-error — v1's flat `total` string is not v2's { amount, currency }
    const wrong: EventContracts['InvoiceIssued@2'] = { ...v2, total: '1.00' };
    expect([latest, wrong]).toHaveLength(2);
  });
});
