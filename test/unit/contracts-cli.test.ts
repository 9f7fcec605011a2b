import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliArgs } from '../resilience/assembler-process.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Runs the real command line; resolves with its exit code and output. */
function cli(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...cliArgs(), ...args], { cwd, encoding: 'utf8' }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('event-assembler contracts (exit codes for CI)', () => {
  let work: string;
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'contracts-cli-'));
    cpSync(join(root, 'contracts/invoicing'), join(work, 'contracts/invoicing'), { recursive: true });
    cpSync(join(root, 'contracts/invoicing'), join(work, 'broken/invoicing'), { recursive: true });
    writeFileSync(join(work, 'broken/invoicing/InvoicePaid.v1.schema.json'), '{ "oops": ');
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('0: contracts are fine', async () => {
    const { code, stdout } = await cli(['contracts', 'check', '--no-against'], work);
    expect(code).toBe(0);
    expect(stdout).toContain('contracts check: 8 contract(s) in contracts, 0 violation(s)');
  });

  it('1: violations, one line each', async () => {
    const { code, stdout } = await cli(['contracts', 'check', '--dir', 'broken', '--no-against'], work);
    expect(code).toBe(1);
    expect(stdout).toMatch(/^broken\/invoicing\/InvoicePaid\.v1\.schema\.json: not valid JSON: /m);
  });

  it('2: usage and I/O errors', async () => {
    const [unknownOption, missingDir] = await Promise.all([cli(['contracts', 'check', '--bogus'], work), cli(['contracts', 'check', '--dir', 'nowhere', '--no-against'], work)]);
    expect(unknownOption.code).toBe(2);
    expect(unknownOption.stderr).toContain("unknown option '--bogus'");
    expect(missingDir.code).toBe(2);
    expect(missingDir.stderr).toContain('cannot read the contracts directory nowhere: no such directory');
  });

  it('gen --check: 0 when the committed types are fresh', async () => {
    const { code, stdout } = await cli(['contracts', 'gen', '--dir', 'contracts/invoicing', '--out', 'examples/invoicing/contracts.generated.ts', '--check'], root);
    expect(stdout).toContain('is up to date');
    expect(code).toBe(0);
  });

  it('--help teaches immutability and exit codes', async () => {
    const { code, stdout } = await cli(['contracts', 'check', '--help'], work);
    expect(code).toBe(0);
    expect(stdout).toContain('What "immutable" means');
    expect(stdout).toContain('Exit codes: 0 no violations; 1 violations; 2 usage or I/O error');
  });
});
