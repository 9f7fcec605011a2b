import { AssertionError } from 'node:assert';
import { describe, expect, it } from 'vitest';
import { defineMapper, MapperError } from '../../src/mapping/index.js';
import { del, insert, mapperSpec, relation, snapshotRecord, transaction, update } from '../../src/testing/mapper-kit.js';

const echo = defineMapper({
  name: 'echo',
  tables: { 'public.thing': { columns: ['id', 'v'] } },
  map: (tx) => tx.rows('public.thing').map((r) => ({ stream: `thing-${String(r.id)}`, type: 'ThingSeen', version: 1, data: { v: r.v } })),
});

describe('mapper kit builders', () => {
  it('synthesize relations with key columns (default id)', () => {
    const change = insert('public.thing', { id: 't1', v: 1 });
    expect(change.key).toEqual({ id: 't1' });
    expect(change.relation).toMatchObject({ schema: 'public', name: 'thing', table: 'public.thing', replicaIdentity: 'default' });
    expect(change.relation.columns.map((c) => [c.name, c.isKey])).toEqual([
      ['id', true],
      ['v', false],
    ]);
    expect(relation('public.line', { a: 1, b: 2 }, { key: ['a', 'b'] }).columns.every((c) => c.isKey)).toBe(true);
    expect(() => insert('public.line', { a: 1 })).toThrow(/pass \{ key/);
  });

  it('update/delete infer the replica identity and an old key', () => {
    const full = update('public.thing', { id: 't1', v: 1 }, { id: 't1', v: 2 });
    expect(full.relation.replicaIdentity).toBe('full');
    expect(full.oldKey).toBeNull();
    const rekey = update('public.thing', { id: 't0' }, { id: 't1', v: 2 });
    expect(rekey.oldKey).toEqual({ id: 't0' });
    expect(del('public.thing', { id: 't1' }).relation.replicaIdentity).toBe('default');
  });

  it('transaction() has stable defaults and accepts a position', () => {
    expect(transaction([])).toEqual(transaction([]));
    const tx = transaction([], { commitLsn: '0/1', xid: 5, commitTime: '2026-03-01T00:00:00.000000Z' });
    expect(tx.position).toMatchObject({ commitLsn: '0/1', xid: 5 });
    expect(snapshotRecord('public.thing', { id: 't1' }, { generation: 'g9' }).change).toMatchObject({ op: 'read', snapshotGeneration: 'g9', key: { id: 't1' } });
  });
});

describe('mapperSpec', () => {
  it('then() passes on the expected events and fails with a diff otherwise', () => {
    mapperSpec(echo).when([insert('public.thing', { id: 't1', v: 1 })]).then([{ stream: 'thing-t1', type: 'ThingSeen', version: 1, data: { v: 1 } }]);
    expect(() =>
      mapperSpec(echo).when([insert('public.thing', { id: 't1', v: 1 })]).then([{ stream: 'thing-t1', type: 'ThingSeen', version: 1, data: { v: 2 } }]),
    ).toThrow(AssertionError);
  });

  it('then() compares only the metadata keys given', () => {
    mapperSpec(echo)
      .given({ assembler: 'shop' })
      .when([insert('public.thing', { id: 't1', v: 1 })])
      .then([{ stream: 'thing-t1', type: 'ThingSeen', version: 1, data: { v: 1 }, metadata: { assembler: 'shop', contract: 'ThingSeen@1' } }]);
  });

  it('thenNothing() fails when events come out', () => {
    mapperSpec(echo).when([insert('public.other', { id: 'o' })]).thenNothing();
    expect(() => mapperSpec(echo).when([insert('public.thing', { id: 't1', v: 1 })]).thenNothing()).toThrow(AssertionError);
  });

  it('thenThrows() returns the MapperError, even for a park mapper', () => {
    const parked = defineMapper({
      name: 'parked',
      onError: 'park',
      tables: { 'public.thing': { columns: ['id'] } },
      map: () => {
        throw new Error('boom');
      },
    });
    const error = mapperSpec(parked).when([insert('public.thing', { id: 't1' })]).thenThrows('boom');
    expect(error).toBeInstanceOf(MapperError);
    expect(() => mapperSpec(parked).when([insert('public.thing', { id: 't1' })]).then([])).toThrow(/failed \(parked\): boom/);
    expect(() => mapperSpec(echo).when([insert('public.thing', { id: 't1', v: 1 })]).thenThrows()).toThrow(/to throw/);
  });

  it('checks purity by default', () => {
    const impure = defineMapper({ name: 'impure', tables: { 'public.thing': { columns: ['id'] } }, map: () => [{ stream: 'thing-1', type: 'T', version: 1, data: { r: Math.random() } }] });
    expect(() => mapperSpec(impure).when([insert('public.thing', { id: 't1' })]).then([])).toThrow(/not pure/);
  });
});
