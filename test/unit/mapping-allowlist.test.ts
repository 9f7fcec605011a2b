import { describe, expect, it } from 'vitest';
import {
  contractViolationRecord,
  defineMapper,
  MapperConfigError,
  MapperError,
  mapperRequirements,
  mapUnit,
  requiresReplicaIdentityFull,
} from '../../src/mapping/index.js';
import { del, insert, snapshotRecord, transaction, update } from '../../src/testing/mapper-kit.js';
import { touchesDeclaredTables, visibleUnit } from '../../src/mapping/allowlist.js';
import type { SourceUnit } from '../../src/source/types.js';
import { mappers } from '../../examples/invoicing/index.js';

const context = { assembler: 'invoicing', sourceIdentity: '7000000000000000001' };
const EMAIL = 'ada@example.com';
const CARD = '4111111111111111';

const customerRow = { id: 'c1', name: 'Ada', email: EMAIL, card_number: CARD, country: 'GB', created_at: '2026-01-15T09:00:00.000000Z' };

/** Everything a mapper could try to leak through: every value of the row, any key. */
const greedy = (onError: 'halt' | 'park', fail: boolean) =>
  defineMapper({
    name: `greedy-${onError}`,
    onError,
    tables: { 'public.customer': { columns: ['id', 'name', 'country'], before: 'key' } },
    map: (tx) => {
      const seen = tx.changes().map((c) => ({ after: c.after, before: c.before, key: c.key, oldKey: c.oldKey }));
      if (fail) throw new Error(`failed on ${JSON.stringify(seen)}`);
      return tx.changes('public.customer').map((c) => ({
        stream: `customer-${String(c.key.id)}`,
        type: 'CustomerSeen',
        version: 1,
        data: { seen, all: { ...(c.after ?? {}) } },
        metadata: Object.fromEntries(Object.entries(c.after ?? {}).map(([k, v]) => [`row.${k}`, String(v)])),
      }));
    },
  });

function leaks(value: unknown): boolean {
  const text = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  return text.includes(EMAIL) || text.includes(CARD) || text.includes('card_number') || text.includes('email');
}

const units = [
  transaction([insert('public.customer', customerRow)]),
  transaction([update('public.customer', customerRow, { ...customerRow, name: 'Ada L.' })]),
  transaction([update('public.customer', { ...customerRow, id: 'c0' }, customerRow)]),
  transaction([del('public.customer', customerRow)]),
  snapshotRecord('public.customer', customerRow),
];

describe('allowlist: sensitive columns never leave', () => {
  it.each(units.map((u, i) => [i, u] as const))('unit %i: not in event data or metadata', (_i, unit) => {
    const { events, failed } = mapUnit([greedy('halt', false)], unit, context);
    expect(events.length).toBeGreaterThan(0);
    expect(failed).toEqual([]);
    expect(leaks(events)).toBe(false);
  });

  it.each(units.map((u, i) => [i, u] as const))('unit %i: not in a parked failure', (_i, unit) => {
    const { failed } = mapUnit([greedy('park', true)], unit, context);
    expect(failed).toHaveLength(1);
    expect(leaks(failed)).toBe(false);
  });

  it('not in a halting MapperError (message, details, cause)', () => {
    let error: MapperError | undefined;
    try {
      mapUnit([greedy('halt', true)], units[0]!, context);
    } catch (e) {
      error = e as MapperError;
    }
    expect(error).toBeInstanceOf(MapperError);
    expect(leaks({ message: error!.message, details: error!.details, cause: (error!.cause as Error).message })).toBe(false);
  });

  it('not in a contract violation record built from an event', () => {
    const { events } = mapUnit([greedy('halt', false)], units[0]!, context);
    const record = contractViolationRecord(events[0]!, [{ path: '/data', message: 'must NOT have additional properties' }]);
    expect(leaks(record)).toBe(false);
  });

  it('not in anything the example mappers produce, whatever the customer does', () => {
    for (const unit of units) {
      const { events, failed } = mapUnit(mappers, unit, context);
      expect(leaks(events)).toBe(false);
      expect(leaks(failed)).toBe(false);
    }
  });

  it('the leak check itself detects a mapper that does allowlist the sensitive columns', () => {
    const careless = defineMapper({
      name: 'careless',
      tables: { 'public.customer': { columns: ['id', 'email', 'card_number'] } },
      map: (tx) => tx.rows('public.customer').map((row) => ({ stream: `customer-${String(row.id)}`, type: 'X', version: 1, data: { ...row } })),
    });
    expect(leaks(mapUnit([careless], units[0]!, context).events)).toBe(true);
  });

  it('removes undeclared key columns too', () => {
    let key: unknown;
    const keyless = defineMapper({
      name: 'keyless',
      tables: { 'public.customer': { columns: ['name'] } },
      map: (tx) => ((key = tx.changes()[0]!.key), []),
    });
    mapUnit([keyless], units[0]!, context);
    expect(key).toEqual({});
  });
});

describe('defineMapper validation', () => {
  const base = { name: 'm', map: () => [] };
  it.each([
    [{ ...base, tables: { invoice: { columns: ['id'] } } }, "tables['invoice']"],
    [{ ...base, tables: { 'public.invoice': { columns: [] } } }, "tables['public.invoice'].columns"],
    [{ ...base, tables: { 'public.invoice': { columns: ['id', 'id'] } } }, "tables['public.invoice'].columns[1]"],
    [{ ...base, tables: { 'public.invoice': { columns: ['id'], before: ['status'] } } }, "tables['public.invoice'].before[0]"],
    [{ ...base, tables: {} }, 'tables'],
    [{ ...base, name: '', tables: { 'public.invoice': { columns: ['id'] } } }, 'name'],
    [{ ...base, onError: 'skip', tables: { 'public.invoice': { columns: ['id'] } } }, 'onError'],
  ])('names the field: %o', (definition, field) => {
    let error: unknown;
    try {
      defineMapper(definition as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MapperConfigError);
    expect((error as MapperConfigError).details.field).toBe(field);
    expect((error as MapperConfigError).code).toBe('MAPPER_CONFIG_INVALID');
  });
});

describe('mapperRequirements', () => {
  it('reports per table the columns and whether old values are needed', () => {
    const requirements = mapperRequirements(mappers);
    expect(requirements['public.invoice']).toMatchObject({ needsOldValues: true, oldValueColumns: ['status'] });
    expect(requirements['public.invoice']!.columns).toEqual(expect.arrayContaining(['id', 'status', 'total', 'customer_id']));
    expect(requirements['public.customer']).toMatchObject({ columns: ['country', 'id', 'name'], needsOldValues: false });
    expect(requirements['public.customer']!.columns).not.toContain('email');
    expect(requirements['public.payment']!.needsOldValues).toBe(false);
    expect(requiresReplicaIdentityFull(requirements['public.invoice']!, ['id'])).toBe(true);
    expect(requiresReplicaIdentityFull(requirements['public.customer']!, ['id'])).toBe(false);
  });
});

describe('touchesDeclaredTables agrees with the visible view', () => {
  const declared = { 'public.invoice': { columns: ['id', 'status'], before: 'none' as const } };
  const cases: Array<[string, SourceUnit]> = [
    ['a change of a declared table', transaction([insert('public.invoice', { id: 'i1', status: 'draft' })])],
    ['only undeclared tables', transaction([insert('public.customer', { id: 'c1', name: 'A' })])],
    ['a truncate naming a declared table', transaction([{ op: 'truncate', tables: ['public.invoice'], cascade: false, restartIdentity: false }])],
    ['a snapshot record of a declared table', snapshotRecord('public.invoice', { id: 'i1', status: 'draft' }, { generation: 'g1' })],
    ['a snapshot record of another table', snapshotRecord('public.customer', { id: 'c1' }, { generation: 'g1' })],
  ];
  it.each(cases)('%s', (_name, unit) => {
    const visible = visibleUnit(unit, declared);
    expect(touchesDeclaredTables(unit, declared)).toBe(visible.changes.length > 0 || visible.truncated.length > 0);
  });
});
