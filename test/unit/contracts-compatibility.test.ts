import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { compareSchemas, hasBreakingChange, type ContractChangeKind } from '../../src/contracts/compatibility.js';

type Schema = Record<string, any>;

/** Version 1 of a test contract; each table row edits a copy of it into "version 2". */
const base: Schema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'urn:test:Thing:v1',
  title: 'Thing v1',
  description: 'A thing',
  'x-event-type': 'Thing',
  'x-event-version': 1,
  type: 'object',
  additionalProperties: false,
  required: ['id', 'status', 'amount', 'lines'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 40, description: 'the id' },
    note: { type: ['string', 'null'], maxLength: 200 },
    status: { type: 'string', enum: ['draft', 'issued'] },
    count: { type: 'number', minimum: 0, maximum: 100 },
    amount: { $ref: '#/$defs/decimal' },
    dueDate: { type: 'string', format: 'date' },
    issuedAt: { type: 'string' },
    meta: { type: 'object', properties: { origin: { type: 'string' } } },
    lines: { type: 'array', items: { $ref: '#/$defs/line' } },
  },
  $defs: {
    decimal: { type: 'string', pattern: '^-?\\d+\\.\\d{2}$' },
    line: {
      type: 'object',
      additionalProperties: false,
      required: ['lineNo', 'description'],
      properties: {
        lineNo: { type: 'integer', minimum: 1 },
        // A FIELD called "description" (data), with a "description" annotation.
        description: { type: 'string', description: 'what was sold' },
      },
    },
  },
};

function edit(change: (schema: Schema) => void): Schema {
  const copy = structuredClone(base);
  copy.$id = 'urn:test:Thing:v2';
  copy['x-event-version'] = 2;
  change(copy);
  return copy;
}

const line = (s: Schema) => s.$defs.line.properties;

// [edit, breaking?, expected change kind, expected path]
const table: [string, (s: Schema) => void, boolean, ContractChangeKind, string][] = [
  // breaking
  ['remove a field', (s) => delete s.properties.count, true, 'field-removed', '/properties/count'],
  ['rename a field (removed + added of the same type)', (s) => { s.properties.remark = s.properties.note; delete s.properties.note; }, true, 'field-renamed', '/properties/note'],
  ['narrow ["string","null"] to "string"', (s) => (s.properties.note.type = 'string'), true, 'type-narrowed', '/properties/note'],
  ['narrow number to integer', (s) => (s.properties.count.type = 'integer'), true, 'type-narrowed', '/properties/count'],
  ['change string to number', (s) => (s.properties.issuedAt.type = 'number'), true, 'type-changed', '/properties/issuedAt'],
  ['add a required field', (s) => { s.properties.currency = { type: 'string' }; s.required.push('currency'); }, true, 'field-added-required', '/properties/currency'],
  ['make an optional field required', (s) => s.required.push('note'), true, 'field-became-required', '/properties/note'],
  ['remove an enum value', (s) => (s.properties.status.enum = ['draft']), true, 'enum-value-removed', '/properties/status'],
  ['restrict a free string to an enum', (s) => (s.properties.issuedAt.enum = ['x']), true, 'constraint-tightened', '/properties/issuedAt'],
  ['lower maxLength', (s) => (s.properties.id.maxLength = 20), true, 'constraint-tightened', '/properties/id'],
  ['lower maximum', (s) => (s.properties.count.maximum = 50), true, 'constraint-tightened', '/properties/count'],
  ['raise minLength', (s) => (s.properties.id.minLength = 3), true, 'constraint-tightened', '/properties/id'],
  ['raise minimum', (s) => (s.properties.count.minimum = 1), true, 'constraint-tightened', '/properties/count'],
  ['add a pattern', (s) => (s.properties.id.pattern = '^inv_'), true, 'constraint-tightened', '/properties/id'],
  ['change a pattern in $defs (seen through $ref)', (s) => (s.$defs.decimal.pattern = '^\\d+\\.\\d{2}$'), true, 'constraint-tightened', '/properties/amount'],
  ['close additionalProperties (true → false)', (s) => (s.properties.meta.additionalProperties = false), true, 'constraint-tightened', '/properties/meta'],
  ['add a format', (s) => (s.properties.issuedAt.format = 'date-time'), true, 'constraint-tightened', '/properties/issuedAt'],
  ['change a format', (s) => (s.properties.dueDate.format = 'date-time'), true, 'constraint-tightened', '/properties/dueDate'],
  ['remove a field of array items', (s) => delete line(s).description, true, 'field-removed', '/properties/lines/items/properties/description'],
  ['change the type of an array item field', (s) => (line(s).lineNo.type = 'string'), true, 'type-changed', '/properties/lines/items/properties/lineNo'],
  ['replace the item schema with an incompatible one', (s) => (s.properties.lines.items = { type: 'string' }), true, 'type-changed', '/properties/lines/items'],
  ['add a required field to a nested object', (s) => { s.properties.meta.properties.by = { type: 'string' }; s.properties.meta.required = ['by']; }, true, 'field-added-required', '/properties/meta/properties/by'],
  ['add an unclassified keyword (not)', (s) => (s.properties.id.not = { const: 'x' }), true, 'keyword-changed', '/properties/id'],
  // non-breaking
  ['add an optional field', (s) => (s.properties.reference = { type: 'string' }), false, 'field-added-optional', '/properties/reference'],
  ['add an enum value', (s) => s.properties.status.enum.push('void'), false, 'enum-value-added', '/properties/status'],
  ['raise maxLength', (s) => (s.properties.id.maxLength = 80), false, 'constraint-loosened', '/properties/id'],
  ['lower minimum', (s) => (s.properties.count.minimum = -10), false, 'constraint-loosened', '/properties/count'],
  ['remove a pattern', (s) => delete s.$defs.decimal.pattern, false, 'constraint-loosened', '/properties/amount'],
  ['remove a format', (s) => delete s.properties.dueDate.format, false, 'constraint-loosened', '/properties/dueDate'],
  ['widen "string" to ["string","null"]', (s) => (s.properties.id.type = ['string', 'null']), false, 'type-widened', '/properties/id'],
  ['widen integer to number in array items', (s) => (line(s).lineNo.type = 'number'), false, 'type-widened', '/properties/lines/items/properties/lineNo'],
  ['make a required field optional', (s) => (s.required = s.required.filter((n: string) => n !== 'status')), false, 'field-became-optional', '/properties/status'],
  ['open additionalProperties (false → true)', (s) => (s.additionalProperties = true), false, 'constraint-loosened', ''],
  ['change the root description', (s) => (s.description = 'A thing, better explained'), false, 'annotation-changed', ''],
  ['change the description annotation of a field named "description"', (s) => (line(s).description.description = 'the text'), false, 'annotation-changed', '/properties/lines/items/properties/description'],
];

describe('compareSchemas: breaking vs non-breaking edits', () => {
  it('has a table of at least 15 rows of each kind', () => {
    expect(table.filter((row) => row[2]).length).toBeGreaterThanOrEqual(15);
    expect(table.filter((row) => !row[2]).length).toBeGreaterThanOrEqual(10);
  });

  it.each(table)('%s → breaking: %s', (_name, change, breaking, kind, path) => {
    const changes = compareSchemas(base, edit(change));
    expect(changes).toContainEqual(expect.objectContaining({ kind, path, breaking }));
    expect(hasBreakingChange(changes)).toBe(breaking);
  });

  it('finds no change between a schema and its next version when only identity keywords differ', () => {
    expect(compareSchemas(base, edit(() => {}))).toEqual([]);
  });

  it('says which field, in one line', () => {
    const [removed] = compareSchemas(base, edit((s) => delete s.properties.count));
    expect(removed!.message).toBe('removed field /properties/count');
    const [renamed] = compareSchemas(base, edit((s) => { s.properties.remark = s.properties.note; delete s.properties.note; }));
    expect(renamed!.message).toBe('renamed field /properties/note to /properties/remark (removed + added of the same type: readers of "note" break)');
  });

  it('terminates on recursive schemas', () => {
    const tree = (extra: Schema = {}): Schema => ({
      type: 'object',
      properties: { children: { type: 'array', items: { $ref: '#' } }, name: { type: 'string', ...extra } },
    });
    expect(compareSchemas(tree(), tree())).toEqual([]);
    expect(compareSchemas(tree(), tree({ maxLength: 3 }))).toContainEqual(expect.objectContaining({ kind: 'constraint-tightened', path: '/properties/name' }));
  });

  it('classifies InvoiceIssued v1 → v2 as breaking, field by field', () => {
    const read = (name: string) => JSON.parse(readFileSync(fileURLToPath(new URL(`../../contracts/invoicing/${name}`, import.meta.url)), 'utf8')) as unknown;
    const changes = compareSchemas(read('InvoiceIssued.v1.schema.json'), read('InvoiceIssued.v2.schema.json')).filter((c) => c.kind !== 'annotation-changed');
    expect(changes.map((c) => c.message)).toEqual([
      'removed field /properties/currency',
      'added required field /properties/dueDate',
      'changed type of /properties/total from "string" to "object"',
    ]);
  });
});
