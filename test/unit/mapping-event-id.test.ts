import { describe, expect, it } from 'vitest';
import { canonicalKey, changeEventId, changeEventIdName, DNS_NAMESPACE, EVENT_ASSEMBLER_NAMESPACE, snapshotEventId, uuidv5 } from '../../src/mapping/event-id.js';
import { defineMapper, mapUnit } from '../../src/mapping/index.js';
import { insert, snapshotRecord, transaction } from '../../src/testing/mapper-kit.js';

const parts = { assembler: 'invoicing', sourceIdentity: '7000000000000000001:slot', commitLsn: '0/16B3748', xid: 744, mapper: 'm', ordinal: 0 };

describe('uuidv5', () => {
  it('matches the RFC 9562 known answer (DNS namespace, www.example.com)', () => {
    expect(uuidv5('www.example.com', DNS_NAMESPACE)).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
  });

  it('matches the widely published python.org vector', () => {
    // Python: uuid.uuid5(uuid.NAMESPACE_DNS, 'python.org')
    expect(uuidv5('python.org', DNS_NAMESPACE)).toBe('886313e1-3b8a-5372-9b90-0c9aee199e5d');
  });

  it('sets version 5 and the RFC variant', () => {
    const id = uuidv5('anything', DNS_NAMESPACE);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('gives the ids published before the one-shot hash (all four variant digits, long and non-ASCII names)', () => {
    // Computed with the createHash implementation this one replaced; event ids must never change.
    const ns = EVENT_ASSEMBLER_NAMESPACE;
    expect(uuidv5('event-assembler', ns)).toBe('4aa0acba-919e-5870-92fa-b2ce84e0a56e');
    expect(uuidv5('InvoiceIssued', ns)).toBe('71a39379-b086-5886-ae85-11978590d533');
    expect(uuidv5('x'.repeat(100), ns)).toBe('d38080cb-ae38-5238-87c4-01a537cc3ba0');
    expect(uuidv5('ünïcödé 日本', ns)).toBe('42ef1310-645e-5c55-824b-9f4af82fb439');
    expect(changeEventId({ assembler: 'invoicing', sourceIdentity: '7000000000000000001', commitLsn: '0/16B3748', xid: 744, mapper: 'm', ordinal: 0 })).toBe('eae0b097-6717-5419-87ca-602ac4197725');
  });

  it('rejects a namespace that is not a UUID', () => {
    expect(() => uuidv5('x', 'not-a-uuid')).toThrow(/namespace/);
  });
});

describe('change event ids', () => {
  it('hash exactly the JSON array of their parts (the cached-pieces name equals JSON.stringify)', () => {
    const cases = [
      parts,
      { ...parts, assembler: 'we"ird\\name', mapper: 'mäpper', ordinal: 12 },
      { ...parts, commitLsn: '0/a1b' },
      { ...parts, commitLsn: 'FFFFFFFF/FFFFFFFF', xid: 4294967295 },
    ];
    for (const c of cases) {
      expect(changeEventIdName(c)).toBe(JSON.stringify(['change', c.assembler, c.sourceIdentity, c.commitLsn, c.xid, c.mapper, c.ordinal]));
      expect(changeEventId(c)).toBe(uuidv5(JSON.stringify(['change', c.assembler, c.sourceIdentity, c.commitLsn, c.xid, c.mapper, c.ordinal]), EVENT_ASSEMBLER_NAMESPACE));
    }
  });

  it('are identical across replays of the same transaction', () => {
    expect(changeEventId(parts)).toBe(changeEventId({ ...parts }));
  });

  it('differ when the xid repeats at another commit LSN (xid wraparound)', () => {
    expect(changeEventId(parts)).not.toBe(changeEventId({ ...parts, commitLsn: '0/2000000' }));
  });

  it.each([
    ['assembler', { assembler: 'other' }],
    ['source identity', { sourceIdentity: '7000000000000000002:slot' }],
    ['xid', { xid: 745 }],
    ['mapper', { mapper: 'n' }],
    ['ordinal', { ordinal: 1 }],
  ])('differ per %s', (_what, change) => {
    expect(changeEventId(parts)).not.toBe(changeEventId({ ...parts, ...change }));
  });

  it('cannot be confused by shifting characters between parts', () => {
    expect(changeEventId({ ...parts, assembler: 'ab', mapper: 'c' })).not.toBe(changeEventId({ ...parts, assembler: 'a', mapper: 'bc' }));
  });
});

describe('snapshot event ids', () => {
  const snap = { assembler: 'invoicing', snapshotGeneration: 'g1', table: 'public.invoice', key: { id: 'inv_1' }, mapper: 'm', ordinal: 0 };

  it('are stable and independent of key column order', () => {
    expect(snapshotEventId(snap)).toBe(snapshotEventId({ ...snap, key: { id: 'inv_1' } }));
    const a = canonicalKey({ invoice_id: 'i', line_no: 1 });
    expect(a).toBe(canonicalKey({ line_no: 1, invoice_id: 'i' }));
  });

  it.each([
    ['generation', { snapshotGeneration: 'g2' }],
    ['table', { table: 'public.payment' }],
    ['key', { key: { id: 'inv_2' } }],
    ['mapper', { mapper: 'n' }],
    ['ordinal', { ordinal: 1 }],
  ])('differ per %s', (_what, change) => {
    expect(snapshotEventId(snap)).not.toBe(snapshotEventId({ ...snap, ...change }));
  });

  it('keep key values of different JS types apart', () => {
    expect(canonicalKey({ id: 1 })).not.toBe(canonicalKey({ id: '1' }));
    expect(canonicalKey({ id: 1n })).not.toBe(canonicalKey({ id: '1' }));
    expect(canonicalKey({ id: Buffer.from('ab') })).not.toBe(canonicalKey({ id: 'ab' }));
  });
});

describe('ids assigned by mapUnit', () => {
  const twoEvents = defineMapper({
    name: 'two',
    tables: { 'public.invoice': { columns: ['id'] } },
    map: (tx) =>
      tx.rows('public.invoice').flatMap((row) => [
        { stream: `invoice-${String(row.id)}`, type: 'A', version: 1, data: {} },
        { stream: `invoice-${String(row.id)}`, type: 'B', version: 1, data: {} },
      ]),
  });
  const context = { assembler: 'invoicing', sourceIdentity: '7000000000000000001:slot' };
  const tx = (options: { commitLsn?: string; xid?: number } = {}) => transaction([insert('public.invoice', { id: 'inv_1' })], options);

  it('replaying a transaction yields the same ids', () => {
    const first = mapUnit([twoEvents], tx(), context).events.map((e) => e.id);
    const replay = mapUnit([twoEvents], tx(), context).events.map((e) => e.id);
    expect(replay).toEqual(first);
    expect(new Set(first).size).toBe(2);
  });

  it('the same xid at another commit LSN yields other ids', () => {
    const a = mapUnit([twoEvents], tx({ commitLsn: '0/100', xid: 7 }), context).events.map((e) => e.id);
    const b = mapUnit([twoEvents], tx({ commitLsn: '0/200', xid: 7 }), context).events.map((e) => e.id);
    expect(a.filter((id) => b.includes(id))).toEqual([]);
  });

  it('snapshot records get ids from generation, table and key', () => {
    const id = (row: { id: string }, generation: string) =>
      mapUnit([twoEvents], snapshotRecord('public.invoice', row, { generation }), context).events[0]!.id;
    expect(id({ id: 'inv_1' }, 'g1')).toBe(id({ id: 'inv_1' }, 'g1'));
    expect(id({ id: 'inv_1' }, 'g1')).not.toBe(id({ id: 'inv_1' }, 'g2'));
    expect(id({ id: 'inv_1' }, 'g1')).not.toBe(id({ id: 'inv_2' }, 'g1'));
  });
});
