import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkContracts, formatFinding, type ContractFile } from '../../src/contracts/check.js';
import { runContractsCheck } from '../../src/cli/commands/contracts.js';

const contractsDir = fileURLToPath(new URL('../../contracts', import.meta.url));
const V1 = 'invoicing/InvoiceIssued.v1.schema.json';

/** The real contract files, paths relative to `contracts/`. */
function realFiles(): ContractFile[] {
  return readdirSync(join(contractsDir, 'invoicing'))
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => ({ path: `invoicing/${name}`, text: readFileSync(join(contractsDir, 'invoicing', name), 'utf8') }));
}

function withEdit(files: ContractFile[], path: string, change: (schema: any) => void): ContractFile[] {
  return files.map((file) => {
    if (file.path !== path) return file;
    const schema = JSON.parse(file.text);
    change(schema);
    return { path, text: JSON.stringify(schema, null, 2) };
  });
}

const lines = (files: { current: ContractFile[]; published?: ContractFile[] }) => checkContracts({ ...files, dir: 'contracts' }).violations.map(formatFinding);

describe('checkContracts (pure)', () => {
  const published = realFiles();

  it('passes the committed contracts against themselves', () => {
    const report = checkContracts({ current: published, published, dir: 'contracts' });
    expect(report.violations).toEqual([]);
    expect(report.contracts).toBe(8);
    expect(report.newVersions).toEqual([]);
  });

  // [edit of published InvoiceIssued v1, expected violation lines]
  const edits: [string, (schema: any) => void, string[]][] = [
    ['description, title, examples and $comment edits are allowed', (s) => { s.description = 'Better words.'; s.title = 'Invoice issued (v1)'; s.examples = [{}]; s.$comment = 'c'; s.$defs.line.properties.description.description = 'Line text'; }, []],
    ['key order and whitespace do not matter', (s) => { const props = s.properties; delete s.properties; s.properties = Object.fromEntries(Object.entries(props).reverse()); s.required.reverse(); }, []],
    ['removing a field', (s) => { delete s.properties.total; s.required = s.required.filter((n: string) => n !== 'total'); }, ['contracts/invoicing/InvoiceIssued.v1.schema.json: breaking edit of a published version: removed field /properties/total']],
    ['tightening a nested field', (s) => (s.$defs.line.properties.description.maxLength = 100), ['contracts/invoicing/InvoiceIssued.v1.schema.json: breaking edit of a published version: added maxLength 100 to /properties/lines/items/properties/description']],
    ['an additive edit is still an edit', (s) => (s.properties.note = { type: 'string' }), ['contracts/invoicing/InvoiceIssued.v1.schema.json: non-breaking edit of a published version: added optional field /properties/note']],
    ['a default is not documentation', (s) => (s.properties.number.default = 'X'), ['contracts/invoicing/InvoiceIssued.v1.schema.json: non-breaking edit of a published version: added default of /properties/number']],
    ['an unreferenced $defs entry', (s) => (s.$defs.unused = { type: 'string' }), ['contracts/invoicing/InvoiceIssued.v1.schema.json: edit of a published version: changed /$defs/unused (only title, description, examples, $comment, deprecated may be edited; publish a new version instead)']],
  ];
  it.each(edits)('%s', (_name, change, expected) => {
    expect(lines({ current: withEdit(published, V1, change), published })).toEqual(expected);
  });

  it('reports a deleted published version', () => {
    expect(lines({ current: published.filter((f) => f.path !== V1), published })).toContain(
      'contracts/invoicing/InvoiceIssued.v1.schema.json: a published version was deleted or renamed; published versions are immutable — restore the file',
    );
  });

  it('classifies new versions relative to the previous one', () => {
    const v2 = published.find((f) => f.path === 'invoicing/InvoiceIssued.v2.schema.json')!;
    const v3 = JSON.parse(v2.text);
    v3.$id = 'urn:event-assembler:contract:invoicing:InvoiceIssued:v3';
    v3['x-event-version'] = 3;
    v3.properties.purchaseOrder = { type: 'string' };
    const current = [...published, { path: 'invoicing/InvoiceIssued.v3.schema.json', text: JSON.stringify(v3) }];
    const report = checkContracts({ current, published: published.filter((f) => !f.path.includes('InvoiceIssued.v2')).concat([]), dir: 'contracts' });
    // v2 missing from the baseline = new (and breaking); v3 additive.
    expect(report.violations).toEqual([]);
    expect(report.newVersions.map((n) => [n.key, n.classification])).toEqual([
      ['InvoiceIssued@2', 'breaking'],
      ['InvoiceIssued@3', 'additive'],
    ]);
    expect(report.newVersions[1]!.changes.map((c) => c.message)).toEqual(['added optional field /properties/purchaseOrder']);
  });

  it('without a baseline, checks files only and lists every version as new', () => {
    const report = checkContracts({ current: withEdit(published, V1, (s) => delete s.properties.total), dir: 'contracts' });
    // Removing a property that is still required is a schema error caught by the compiler.
    expect(report.violations.map(formatFinding)).toEqual([expect.stringMatching(/^contracts\/invoicing\/InvoiceIssued.v1.schema.json: schema does not compile: strict mode: required property "total" is not defined/)]);
    // InvoiceIssued v2 is not classified: its previous version is broken.
    expect(report.newVersions.map((n) => [n.key, n.classification])).toEqual([
      ['CustomerRegistered@1', 'initial'],
      ['InvoiceDiscarded@1', 'initial'],
      ['InvoiceDrafted@1', 'initial'],
      ['InvoiceImported@1', 'initial'],
      ['InvoicePaid@1', 'initial'],
      ['InvoiceVoided@1', 'initial'],
    ]);
  });

  const broken: [string, ContractFile[], string][] = [
    ['a bad file name', [{ path: 'invoicing/invoice-issued.json', text: '{}' }], 'contracts/invoicing/invoice-issued.json: file name must be <Type>.v<N>.schema.json'],
    ['invalid JSON', [{ path: 'invoicing/Thing.v1.schema.json', text: '{ "a": ' }], 'contracts/invoicing/Thing.v1.schema.json: not valid JSON'],
    ['a version that disagrees with its file name', withEdit(realFiles(), 'invoicing/InvoicePaid.v1.schema.json', (s) => (s['x-event-version'] = 2)), 'contracts/invoicing/InvoicePaid.v1.schema.json: "x-event-version" is 2 but the file name says 1'],
    ['a duplicate $id', withEdit(realFiles(), 'invoicing/InvoicePaid.v1.schema.json', (s) => (s.$id = 'urn:event-assembler:contract:invoicing:InvoiceVoided:v1')), 'contracts/invoicing/InvoiceVoided.v1.schema.json: "$id" urn:event-assembler:contract:invoicing:InvoiceVoided:v1 is also used by contracts/invoicing/InvoicePaid.v1.schema.json'],
    ['a version gap', realFiles().filter((f) => !f.path.includes('InvoiceIssued.v1')), 'contracts/invoicing/InvoiceIssued.v2.schema.json: versions of InvoiceIssued must be contiguous from 1: missing v1'],
    ['a type in two domains', [...realFiles(), { path: 'billing/InvoicePaid.v1.schema.json', text: JSON.stringify({ ...JSON.parse(realFiles().find((f) => f.path.includes('InvoicePaid'))!.text), $id: 'urn:test:billing:InvoicePaid:v1' }) }], 'contracts/invoicing/InvoicePaid.v1.schema.json: contract InvoicePaid@1 is also defined by contracts/billing/InvoicePaid.v1.schema.json'],
    ['a schema that does not compile', withEdit(realFiles(), 'invoicing/InvoicePaid.v1.schema.json', (s) => (s.properties.amount.type = 'decimal')), 'contracts/invoicing/InvoicePaid.v1.schema.json: schema does not compile'],
  ];
  it.each(broken)('reports %s', (_name, current, expected) => {
    const found = lines({ current });
    expect(found.some((line) => line.startsWith(expected)), `${found.join('\n')}\n  should contain: ${expected}`).toBe(true);
  });
});

describe('contracts check against a git ref (temporary repository)', () => {
  let repo: string;
  const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8', env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' } });
  const run = async (options: Parameters<typeof runContractsCheck>[0], cwd = repo) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runContractsCheck(options, { out: (l) => out.push(l), err: (l) => err.push(l), cwd });
    return { code, out, err };
  };
  const v1Path = () => join(repo, 'contracts', V1);
  const editV1 = (change: (schema: any) => void) => {
    const schema = JSON.parse(readFileSync(v1Path(), 'utf8'));
    change(schema);
    writeFileSync(v1Path(), `${JSON.stringify(schema, null, 2)}\n`);
  };

  beforeAll(() => {
    repo = mkdtempSync(join(tmpdir(), 'contracts-check-'));
    git('init', '-q');
    git('config', 'user.name', 'Contracts Test');
    git('config', 'user.email', 'contracts-test@example.com');
    git('config', 'commit.gpgsign', 'false');
  });
  afterAll(() => rmSync(repo, { recursive: true, force: true }));

  it('treats everything as new before the first commit', async () => {
    mkdirSync(join(repo, 'contracts'));
    cpSync(join(contractsDir, 'invoicing'), join(repo, 'contracts', 'invoicing'), { recursive: true });
    const { code, out } = await run({ dir: 'contracts' });
    expect(code).toBe(0);
    expect(out.at(-1)).toBe('contracts check: 8 contract(s) in contracts, 0 violation(s); baseline HEAD (no commits yet: nothing published)');
  });

  it('passes a clean checkout and allows description edits', async () => {
    git('add', '-A');
    git('commit', '-q', '-m', 'contracts v1');
    git('tag', 'published');
    expect((await run({ dir: 'contracts' })).code).toBe(0);
    editV1((s) => (s.description = 'Reworded.'));
    expect((await run({ dir: 'contracts' })).code).toBe(0);
  });

  it('fails a working-tree edit of a published version with one line per violation', async () => {
    editV1((s) => {
      delete s.properties.total;
      s.required = s.required.filter((n: string) => n !== 'total');
    });
    const { code, out } = await run({ dir: 'contracts' });
    expect(code).toBe(1);
    expect(out).toContain('contracts/invoicing/InvoiceIssued.v1.schema.json: breaking edit of a published version: removed field /properties/total');
  });

  it('catches an edit committed after the baseline with --against <ref>', async () => {
    git('commit', '-q', '-am', 'sneaky edit of v1');
    expect((await run({ dir: 'contracts' })).code).toBe(0); // HEAD already has the edit
    const { code, out } = await run({ dir: 'contracts', against: 'published' });
    expect(code).toBe(1);
    expect(out[0]).toBe('contracts/invoicing/InvoiceIssued.v1.schema.json: breaking edit of a published version: removed field /properties/total');
    git('revert', '--no-edit', 'HEAD');
  });

  it('reports a deleted published version and accepts a new version', async () => {
    unlinkSync(join(repo, 'contracts/invoicing/InvoiceVoided.v1.schema.json'));
    expect((await run({ dir: 'contracts' })).out[0]).toBe(
      'contracts/invoicing/InvoiceVoided.v1.schema.json: a published version was deleted or renamed; published versions are immutable — restore the file',
    );
    git('checkout', '--', 'contracts');
    const v2 = JSON.parse(readFileSync(join(repo, 'contracts/invoicing/InvoiceVoided.v1.schema.json'), 'utf8'));
    Object.assign(v2, { $id: 'urn:event-assembler:contract:invoicing:InvoiceVoided:v2', 'x-event-version': 2 });
    v2.properties.voidedBy = { type: 'string' };
    writeFileSync(join(repo, 'contracts/invoicing/InvoiceVoided.v2.schema.json'), JSON.stringify(v2));
    const { code, out } = await run({ dir: 'contracts' });
    expect(code).toBe(0);
    expect(out).toContain('  contracts/invoicing/InvoiceVoided.v2.schema.json: InvoiceVoided@2 is additive relative to v1 (readers of the previous version keep working)');
  });

  it('exits 2 on an unknown ref, a missing directory or outside a git repository', async () => {
    const unknownRef = await run({ dir: 'contracts', against: 'no-such-ref' });
    expect(unknownRef.code).toBe(2);
    expect(unknownRef.err[0]).toContain('unknown git ref "no-such-ref"');
    expect((await run({ dir: 'missing' })).code).toBe(2);
    const outside = mkdtempSync(join(tmpdir(), 'contracts-nogit-'));
    try {
      cpSync(join(contractsDir, 'invoicing'), join(outside, 'contracts', 'invoicing'), { recursive: true });
      const result = await run({ dir: 'contracts' }, outside);
      // tmpdir() might itself sit inside a repository; only assert where it does not.
      if (result.code !== 0) {
        expect(result.code).toBe(2);
        expect(result.err[0]).toContain('CONTRACTS_GIT_FAILED');
      }
      expect((await run({ dir: 'contracts', against: false }, outside)).code).toBe(0);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });
});
