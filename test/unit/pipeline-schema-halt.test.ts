// A schema halt names the mappers that allowlist the column (issue 17): the source knows the
// table and the column, the operator acts on a mapper.
import { describe, expect, it } from 'vitest';
import { EventAssemblerError, SchemaChangeError, type SchemaChangeErrorDetails } from '../../src/errors.js';
import { defineMapper } from '../../src/mapping/index.js';
import { nameSchemaChangeMappers } from '../../src/pipeline/schema-halt.js';

const mapper = (name: string, tables: Record<string, readonly string[]>) =>
  defineMapper({ name, tables: Object.fromEntries(Object.entries(tables).map(([t, columns]) => [t, { columns }])), map: () => [] });
const mappers = [
  mapper('shipments', { 'public.shipment': ['id', 'carrier', 'weight'] }),
  mapper('tracking', { 'public.shipment': ['id', 'carrier'], 'public.parcel': ['id'] }),
  mapper('invoices', { 'public.invoice': ['id', 'carrier'] }),
];
const details = (column: string, after: SchemaChangeErrorDetails['after']): SchemaChangeErrorDetails => ({
  table: 'public.shipment', column, relationId: 16384, before: { name: column, typeOid: 1700, typeName: 'numeric' }, after,
});

describe('nameSchemaChangeMappers', () => {
  it('names every mapper that allowlists the column of that table, keeping code and details', () => {
    const named = nameSchemaChangeMappers(new SchemaChangeError('SCHEMA_REQUIRED_COLUMN_RENAMED', details('carrier', { name: 'carrier_name', typeOid: 25 })), mappers);
    expect(named).toBeInstanceOf(SchemaChangeError);
    const e = named as SchemaChangeError;
    expect(e.code).toBe('SCHEMA_REQUIRED_COLUMN_RENAMED');
    expect(e.details).toMatchObject({ table: 'public.shipment', column: 'carrier', mappers: ['shipments', 'tracking'], after: { name: 'carrier_name' } });
    expect(e.message).toBe(
      'required column "carrier" of public.shipment (allowlisted by mapper shipments, tracking) was renamed to "carrier_name"; nothing from the transaction that showed it was delivered, ' +
        'and the slot is not acknowledged past it. Fix: allowlist "carrier_name" instead of "carrier" in the columns of mapper shipments, tracking (and read it under that name), then start again',
    );
  });

  it('says what to do for a dropped and a retyped column, with the type names PostgreSQL sent', () => {
    const dropped = nameSchemaChangeMappers(new SchemaChangeError('SCHEMA_REQUIRED_COLUMN_DROPPED', details('weight', null)), mappers) as SchemaChangeError;
    expect(dropped.message).toMatch(/^required column "weight" of public\.shipment \(allowlisted by mapper shipments\) was dropped; .* Fix: remove "weight" from the columns of mapper shipments/);
    const retyped = nameSchemaChangeMappers(new SchemaChangeError('SCHEMA_REQUIRED_COLUMN_RETYPED', details('weight', { name: 'weight', typeOid: 701, typeName: 'float8' })), mappers) as SchemaChangeError;
    expect(retyped.message).toMatch(/changed type from numeric \(OID 1700\) to float8 \(OID 701\);/);
    expect(retyped.message).toMatch(/a restart takes the new type as known, and every event is still validated against its contract$/);
  });

  it('a column only source.tables requires names no mapper; other errors pass unchanged', () => {
    const e = nameSchemaChangeMappers(new SchemaChangeError('SCHEMA_REQUIRED_COLUMN_MISSING', details('note', null)), mappers) as SchemaChangeError;
    expect(e.details.mappers).toEqual([]);
    expect(e.message).toMatch(/^required column "note" of public\.shipment \(required by source\.tables\) does not exist/);
    expect(e.message).toMatch(/from source\.tables\[\]\.requiredColumns/);
    const other = new EventAssemblerError('SOURCE_SYSTEM_CHANGED', 'another cluster');
    expect(nameSchemaChangeMappers(other, mappers)).toBe(other);
    const once = nameSchemaChangeMappers(new SchemaChangeError('SCHEMA_REQUIRED_COLUMN_DROPPED', details('weight', null)), mappers);
    expect(nameSchemaChangeMappers(once, [])).toBe(once);
  });

  it('without the pipeline (the source alone) the message names no mapper', () => {
    const e = new SchemaChangeError('SCHEMA_REQUIRED_COLUMN_DROPPED', details('weight', null));
    expect(e.message).toMatch(/^required column "weight" of public\.shipment was dropped; .* Fix: remove "weight" from the mapper's columns/);
  });
});
