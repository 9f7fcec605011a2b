// Which validator backs the contract registry? ajv 8 (draft 2020-12 + ajv-formats, the exact
// configuration of src/contracts/validator.ts) vs zod 4's JSON Schema import (`z.fromJSONSchema`),
// on correctness (a table of valid/invalid event data) and speed (validations per second).
//
// Run: node --import tsx bench/validators.bench.ts
// Results: bench/results/validators.md
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { createSchemaCompiler } from '../src/contracts/validator.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const contract = (name: string) => JSON.parse(readFileSync(`${root}contracts/invoicing/${name}.schema.json`, 'utf8')) as Record<string, unknown>;
const schemas = { InvoiceIssuedV2: contract('InvoiceIssued.v2'), InvoiceImportedV1: contract('InvoiceImported.v1') };
type SchemaName = keyof typeof schemas;

const line = (lineNo: number, extra: Record<string, unknown> = {}) => ({ lineNo, description: `line ${lineNo}`, quantity: 2, unitPrice: '10.00', amount: '20.00', ...extra });
const issued = (patch: Record<string, unknown> = {}) => ({
  invoiceId: 'inv_1042',
  customerId: 'cus_7',
  number: 'INV-2026-0042',
  total: { amount: '60.00', currency: 'EUR' },
  issuedAt: '2026-03-01T09:30:00Z',
  dueDate: '2026-03-31',
  lines: [line(1), line(2), line(3)],
  ...patch,
});
const without = (key: string) => Object.fromEntries(Object.entries(issued()).filter(([k]) => k !== key));

const cases: { name: string; schema: SchemaName; data: unknown; valid: boolean }[] = [
  { name: 'valid InvoiceIssued v2', schema: 'InvoiceIssuedV2', data: issued(), valid: true },
  { name: 'dueDate null (["string","null"])', schema: 'InvoiceIssuedV2', data: issued({ dueDate: null }), valid: true },
  { name: 'no lines (empty array)', schema: 'InvoiceIssuedV2', data: issued({ lines: [] }), valid: true },
  { name: 'issuedAt with offset +02:00', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01T11:30:00+02:00' }), valid: true },
  { name: 'issuedAt with fraction', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01T09:30:00.123456Z' }), valid: true },
  { name: 'negative decimal "-5.00"', schema: 'InvoiceIssuedV2', data: issued({ total: { amount: '-5.00', currency: 'EUR' } }), valid: true },
  { name: 'extra top-level property', schema: 'InvoiceIssuedV2', data: issued({ email: 'a@b.c' }), valid: false },
  { name: 'extra property in nested object (total)', schema: 'InvoiceIssuedV2', data: issued({ total: { amount: '1.00', currency: 'EUR', vat: '0.19' } }), valid: false },
  { name: 'extra property in array item (lines[1])', schema: 'InvoiceIssuedV2', data: issued({ lines: [line(1), line(2, { sku: 'x' })] }), valid: false },
  { name: 'missing required (dueDate)', schema: 'InvoiceIssuedV2', data: without('dueDate'), valid: false },
  { name: 'missing required in array item (lines[0].amount)', schema: 'InvoiceIssuedV2', data: issued({ lines: [{ lineNo: 1, description: 'd', quantity: 1, unitPrice: '1.00' }] }), valid: false },
  { name: 'decimal with one fraction digit "12.5"', schema: 'InvoiceIssuedV2', data: issued({ total: { amount: '12.5', currency: 'EUR' } }), valid: false },
  { name: 'decimal as number 12.5', schema: 'InvoiceIssuedV2', data: issued({ total: { amount: 12.5, currency: 'EUR' } }), valid: false },
  { name: 'decimal with trailing text "1.00 EUR"', schema: 'InvoiceIssuedV2', data: issued({ total: { amount: '1.00 EUR', currency: 'EUR' } }), valid: false },
  { name: 'quantity 1.5 (integer)', schema: 'InvoiceIssuedV2', data: issued({ lines: [line(1, { quantity: 1.5 })] }), valid: false },
  { name: 'lineNo 0 (minimum 1)', schema: 'InvoiceIssuedV2', data: issued({ lines: [line(0)] }), valid: false },
  { name: 'currency "eur" (pattern)', schema: 'InvoiceIssuedV2', data: issued({ total: { amount: '1.00', currency: 'eur' } }), valid: false },
  { name: 'number "" (minLength 1)', schema: 'InvoiceIssuedV2', data: issued({ number: '' }), valid: false },
  { name: 'issuedAt is a date, not date-time', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01' }), valid: false },
  { name: 'issuedAt without offset', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01T09:30:00' }), valid: false },
  { name: 'issuedAt hour 25', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01T25:00:00Z' }), valid: false },
  { name: 'dueDate 2026-02-30 (no such day)', schema: 'InvoiceIssuedV2', data: issued({ dueDate: '2026-02-30' }), valid: false },
  { name: 'dueDate 2024-02-29 (leap day)', schema: 'InvoiceIssuedV2', data: issued({ dueDate: '2024-02-29' }), valid: true },
  { name: 'dueDate 2026-02-29 (not a leap year)', schema: 'InvoiceIssuedV2', data: issued({ dueDate: '2026-02-29' }), valid: false },
  { name: 'issuedAt lower-case t/z (RFC 3339 allows)', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01t09:30:00z' }), valid: true },
  { name: 'issuedAt offset without colon "+0200"', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01T11:30:00+0200' }), valid: false },
  { name: 'issuedAt offset "+02" (PostgreSQL text output)', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01T11:30:00+02' }), valid: false },
  { name: 'issuedAt with a space for T', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-03-01 11:30:00+02:00' }), valid: false },
  { name: 'issuedAt month 13', schema: 'InvoiceIssuedV2', data: issued({ issuedAt: '2026-13-01T09:30:00Z' }), valid: false },
  { name: 'lines is an object', schema: 'InvoiceIssuedV2', data: issued({ lines: { 0: line(1) } }), valid: false },
  { name: 'data is an array', schema: 'InvoiceIssuedV2', data: [issued()], valid: false },
  { name: 'enum value "archived"', schema: 'InvoiceImportedV1', data: { invoiceId: 'i', customerId: 'c', status: 'archived', currency: 'EUR', total: '1.00' }, valid: false },
  { name: 'enum value "paid"', schema: 'InvoiceImportedV1', data: { invoiceId: 'i', customerId: 'c', status: 'paid', currency: 'EUR', total: '1.00' }, valid: true },
];

type Check = (data: unknown) => boolean;
interface Candidate {
  readonly name: string;
  build(schema: Record<string, unknown>): Check;
  /** What a mapper author would be told about invalid data. */
  explain(schema: Record<string, unknown>, data: unknown): string;
}

const candidates: Candidate[] = [
  {
    name: 'ajv 8 (2020-12, ajv-formats, RFC 3339 date-time; src/contracts/validator.ts)',
    build(schema) {
      const validate = createSchemaCompiler().compile(schema);
      return (data) => validate(data).ok;
    },
    explain(schema, data) {
      const result = createSchemaCompiler().compile(schema)(data);
      return result.ok ? 'valid' : result.violations.map((v) => `${v.path} [${v.keyword}]`).join(', ');
    },
  },
  {
    name: 'zod 4 z.fromJSONSchema',
    build(schema) {
      const parsed = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
      return (data) => parsed.safeParse(data).success;
    },
    explain(schema, data) {
      const result = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]).safeParse(data);
      return result.success ? 'valid' : result.error.issues.map((issue) => `/${issue.path.join('/')} [${issue.code}]`).join(', ');
    },
  },
];

function opsPerSecond(check: Check, data: unknown, expected: boolean): number {
  for (let i = 0; i < 5_000; i++) if (check(data) !== expected) throw new Error('inconsistent result');
  let iterations = 0;
  const started = process.hrtime.bigint();
  let elapsed = 0n;
  while (elapsed < 1_000_000_000n) {
    for (let i = 0; i < 1_000; i++) check(data);
    iterations += 1_000;
    elapsed = process.hrtime.bigint() - started;
  }
  return (iterations * 1e9) / Number(elapsed);
}

const invalidEvent = issued({ email: 'x', total: { amount: '1.5', currency: 'eur' } });
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const rows: string[] = [];
const speed: string[] = [];
for (const candidate of candidates) {
  const compileStart = process.hrtime.bigint();
  const checks = Object.fromEntries(
    Object.entries(schemas).map(([name, schema]) => {
      try {
        return [name, candidate.build(schema)];
      } catch (error) {
        return [name, (error as Error).message];
      }
    }),
  ) as Record<SchemaName, Check | string>;
  const compileMs = Number(process.hrtime.bigint() - compileStart) / 1e6;
  let correct = 0;
  const wrong: string[] = [];
  for (const testCase of cases) {
    const check = checks[testCase.schema];
    const got = typeof check === 'string' ? `compile error: ${check}` : check(testCase.data);
    if (got === testCase.valid) correct++;
    else wrong.push(`${testCase.name} (expected ${testCase.valid ? 'valid' : 'invalid'}, got ${String(got)})`);
  }
  rows.push(`| ${candidate.name} | ${correct}/${cases.length} | ${wrong.length === 0 ? '—' : wrong.join('; ')} |`);
  const check = checks.InvoiceIssuedV2;
  if (typeof check !== 'string') {
    const valid = opsPerSecond(check, issued(), true);
    const invalid = opsPerSecond(check, invalidEvent, false);
    speed.push(`| ${candidate.name} | ${fmt(valid)} | ${fmt(invalid)} | ${compileMs.toFixed(1)} |`);
  }
}

console.log(`node ${process.version}, ${process.platform}/${process.arch}`);
console.log('\nCorrectness (event data against contracts/invoicing InvoiceIssued.v2 / InvoiceImported.v1):\n');
console.log('| validator | agrees with JSON Schema 2020-12 | wrong answers |\n|---|---|---|');
for (const row of rows) console.log(row);
console.log('\nSpeed (InvoiceIssued v2, 3 lines; one process, same run):\n');
console.log('| validator | valid events/s | invalid events/s (3 violations) | compile 2 schemas (ms) |\n|---|---|---|---|');
for (const row of speed) console.log(row);
console.log('\nViolations reported for the invalid event (extra "email", amount "1.5", currency "eur"):\n');
for (const candidate of candidates) console.log(`- ${candidate.name}: ${candidate.explain(schemas.InvoiceIssuedV2, invalidEvent)}`);
