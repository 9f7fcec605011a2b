import { describe, expect, it } from 'vitest';
import { EventAssemblerError, SchemaChangeError, TableRenamedError } from '../../src/errors.js';
import { nameSchemaChangeMappers } from '../../src/pipeline/schema-halt.js';
import { defineMapper } from '../../src/mapping/index.js';
import { deleteChange, insertChange, truncateChange, updateChange } from '../../src/source/changes.js';
import type { RelationColumnMessage, RelationMessage, TupleValue } from '../../src/source/pgoutput/messages.js';
import { createRelationRegistry } from '../../src/source/relations.js';
import { UNCHANGED_TOAST, type ReplicaIdentity } from '../../src/source/types.js';

const col = (name: string, typeOid: number, key = false, typeModifier = -1): RelationColumnMessage => ({ flags: key ? 1 : 0, name, typeOid, typeModifier });
const rel = (columns: RelationColumnMessage[], replicaIdentity: ReplicaIdentity = 'default', relationId = 16384, name = 'invoice'): RelationMessage => ({
  tag: 'relation', relationId, schema: 'public', name, replicaIdentity, columns,
});
const base = [col('id', 20, true), col('status', 25), col('total', 1700)];
const t = (value: string): TupleValue => ({ kind: 'text', value });
const NULL: TupleValue = { kind: 'null' };
const TOAST: TupleValue = { kind: 'unchanged-toast' };

describe('RelationRegistry', () => {
  it('first sight yields no SchemaChange; an identical repeat yields none and keeps the version', () => {
    const r = createRelationRegistry();
    const first = r.apply(rel(base));
    expect(first.schemaChange).toBeNull();
    expect(first.entry.version).toMatchObject({ table: 'public.invoice', version: 1, replicaIdentity: 'default' });
    expect(first.entry.version.columns.map((c) => [c.name, c.typeName, c.isKey])).toEqual([['id', 'int8', true], ['status', 'text', false], ['total', 'numeric', false]]);
    const again = r.apply(rel(base));
    expect(again.schemaChange).toBeNull();
    expect(again.entry).toBe(first.entry);
    expect(r.get(16384)).toBe(first.entry);
    expect(r.byTable('public.invoice')).toBe(first.entry);
  });

  it('a captured table renamed (same OID, another name) throws TableRenamedError and leaves the registry unchanged; an uncaptured one is followed', () => {
    const r = createRelationRegistry({ captured: ['public.invoice'] });
    const first = r.apply(rel(base));
    let thrown: unknown;
    try {
      r.apply(rel(base, 'default', 16384, 'invoice_archive'));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TableRenamedError);
    expect(thrown).toMatchObject({ code: 'SCHEMA_CAPTURED_TABLE_RENAMED', details: { from: 'public.invoice', to: 'public.invoice_archive', relationId: 16384 } });
    expect(r.get(16384)).toBe(first.entry);
    expect(r.byTable('public.invoice_archive')).toBeUndefined();
    // The pipeline names the mappers that read the old name, and the fix says where to change it.
    const reader = defineMapper({ name: 'invoices', tables: { 'public.invoice': { columns: ['id'] } }, map: () => [] });
    const other = defineMapper({ name: 'others', tables: { 'public.customer': { columns: ['id'] } }, map: () => [] });
    const named = nameSchemaChangeMappers(thrown, [reader, other]) as TableRenamedError;
    expect(named.details.mappers).toEqual(['invoices']);
    expect(named.message).toContain('captured table public.invoice (read by mapper invoices) was renamed to public.invoice_archive (relation OID 16384)');
    expect(named.message).toContain('Fix: name it "public.invoice_archive" in source.tables (if listed) and the tables of mapper invoices');
    // Not captured (e.g. a table that joined the publication): its rename is just followed.
    const loose = createRelationRegistry({ captured: ['public.customer'] });
    loose.apply(rel(base));
    expect(loose.apply(rel(base, 'default', 16384, 'invoice_archive')).entry.version.table).toBe('public.invoice_archive');
  });

  it('added, dropped and retyped columns and a replica identity change', () => {
    const r = createRelationRegistry();
    r.apply(rel(base));
    const added = r.apply(rel([...base, col('due', 1082)])).schemaChange!;
    expect(added).toMatchObject({ op: 'schema', table: 'public.invoice', added: ['due'], dropped: [], renamed: [], retyped: [], replicaIdentityChanged: false });
    expect(added.previous?.version).toBe(1);
    expect(added.current.version).toBe(2);
    const dropped = r.apply(rel([base[0]!, base[2]!, col('due', 1082)])).schemaChange!;
    expect(dropped).toMatchObject({ added: [], dropped: ['status'], renamed: [] });
    const retyped = r.apply(rel([base[0]!, col('total', 701), col('due', 1082)], 'full')).schemaChange!;
    expect(retyped).toMatchObject({ retyped: [{ column: 'total', fromType: 1700, toType: 701 }], replicaIdentityChanged: true });
    expect(retyped.current.version).toBe(4);
  });

  it('a typmod change is reported under retyped with the modifiers', () => {
    const r = createRelationRegistry();
    r.apply(rel([col('id', 20, true), col('code', 1043, false, 14)]));
    const change = r.apply(rel([col('id', 20, true), col('code', 1043, false, 24)])).schemaChange!;
    expect(change.retyped).toEqual([{ column: 'code', fromType: 1043, toType: 1043, fromTypeModifier: 14, toTypeModifier: 24 }]);
  });

  it('rename heuristic: same position, same type, new name, same count', () => {
    const r = createRelationRegistry();
    r.apply(rel(base));
    const change = r.apply(rel([base[0]!, col('state', 25), base[2]!])).schemaChange!;
    expect(change).toMatchObject({ renamed: [{ from: 'status', to: 'state' }], added: [], dropped: [] });
    // Different type at the same position: drop + add, not a rename.
    const change2 = r.apply(rel([base[0]!, col('flag', 16), base[2]!])).schemaChange!;
    expect(change2).toMatchObject({ renamed: [], added: ['flag'], dropped: ['state'] });
    // Known limit: "drop status, add note text" at the last position looks like a rename.
    const r2 = createRelationRegistry();
    r2.apply(rel([col('id', 20, true), col('status', 25)]));
    expect(r2.apply(rel([col('id', 20, true), col('note', 25)])).schemaChange!.renamed).toEqual([{ from: 'status', to: 'note' }]);
  });

  it('compares the first Relation with a known (catalog) version', () => {
    const seed = createRelationRegistry();
    const known = seed.apply(rel(base)).entry.version;
    const same = createRelationRegistry({ known: [known] }).apply(rel(base));
    expect(same.schemaChange).toBeNull();
    expect(same.entry.version).toBe(known);
    const changed = createRelationRegistry({ known: [known] }).apply(rel([...base, col('x', 23)]));
    expect(changed.schemaChange).toMatchObject({ added: ['x'], previous: known });
    expect(changed.entry.version.version).toBe(2);
  });

  it('Type messages name non-built-in column types and choose their decoders', () => {
    const r = createRelationRegistry();
    r.recordType({ tag: 'type', typeOid: 90001, schema: 'public', name: 'invoice_status' });
    r.recordType({ tag: 'type', typeOid: 90002, schema: 'public', name: '_invoice_status' });
    const { entry } = r.apply(rel([col('id', 20, true), col('s', 90001), col('history', 90002)]));
    expect(entry.version.columns.map((c) => c.typeName)).toEqual(['int8', 'invoice_status', '_invoice_status']);
    expect(insertChange(entry, { tag: 'insert', relationId: 16384, newTuple: [t('1'), t('paid'), t('{draft,paid}')] }).after)
      .toEqual({ id: 1n, s: 'paid', history: ['draft', 'paid'] });
  });

  describe('requireColumns', () => {
    const expectError = (fn: () => unknown, code: string, details: object) => {
      try {
        fn();
      } catch (e) {
        expect(e).toBeInstanceOf(SchemaChangeError);
        expect(e).toBeInstanceOf(EventAssemblerError);
        expect((e as SchemaChangeError).code).toBe(code);
        expect((e as SchemaChangeError).details).toMatchObject(details);
        return e as SchemaChangeError;
      }
      throw new Error('expected a SchemaChangeError');
    };

    it('dropping a required column is loud; the registry keeps the old version', () => {
      const r = createRelationRegistry();
      r.requireColumns('public.invoice', ['id', 'total']);
      r.apply(rel(base));
      const e = expectError(() => r.apply(rel([base[0]!, base[1]!])), 'SCHEMA_REQUIRED_COLUMN_DROPPED', {
        table: 'public.invoice', column: 'total', before: { name: 'total', typeOid: 1700 }, after: null,
      });
      expect(e.message).toMatch(/required column "total" of public\.invoice was dropped/);
      expect(r.get(16384)?.version.version).toBe(1);
      // Not-required columns may change freely.
      expect(r.apply(rel([base[0]!, col('state', 25), base[2]!])).schemaChange?.renamed).toHaveLength(1);
    });

    it('renaming or retyping a required column is loud', () => {
      const r = createRelationRegistry();
      r.apply(rel(base));
      r.requireColumns('public.invoice', ['status']);
      expectError(() => r.apply(rel([base[0]!, col('state', 25), base[2]!])), 'SCHEMA_REQUIRED_COLUMN_RENAMED', {
        column: 'status', before: { name: 'status', typeOid: 25 }, after: { name: 'state', typeOid: 25 },
      });
      expectError(() => r.apply(rel([base[0]!, col('status', 23), base[2]!])), 'SCHEMA_REQUIRED_COLUMN_RETYPED', {
        column: 'status', before: { name: 'status', typeOid: 25 }, after: { name: 'status', typeOid: 23 },
      });
    });

    it('a required column that does not exist is loud, at declaration or first sight', () => {
      const r = createRelationRegistry();
      r.apply(rel(base));
      expectError(() => r.requireColumns('public.invoice', ['nope']), 'SCHEMA_REQUIRED_COLUMN_MISSING', { column: 'nope' });
      const r2 = createRelationRegistry();
      r2.requireColumns('public.invoice', ['nope']);
      expectError(() => r2.apply(rel(base)), 'SCHEMA_REQUIRED_COLUMN_MISSING', { column: 'nope', before: null, after: null });
    });
  });
});

describe('changes', () => {
  const registry = createRelationRegistry();
  const entry = registry.apply(rel([col('id', 20, true), col('body', 25), col('n', 23)])).entry;
  // pgoutput flags every column as part of the identity under REPLICA IDENTITY FULL (proto.c).
  const full = registry.apply(rel([col('id', 20, true), col('body', 25, true), col('n', 23, true)], 'full', 16390, 'doc')).entry;

  it('insert: typed row and key', () => {
    const c = insertChange(entry, { tag: 'insert', relationId: 16384, newTuple: [t('7'), NULL, t('3')] });
    expect(c).toMatchObject({ op: 'insert', table: 'public.invoice', after: { id: 7n, body: null, n: 3 }, key: { id: 7n } });
    expect(c.relation).toBe(entry.version);
  });

  it('update without old tuple; unchanged TOAST stays the marker', () => {
    const c = updateChange(entry, { tag: 'update', relationId: 16384, oldKind: null, oldTuple: null, newTuple: [t('7'), TOAST, t('4')] });
    expect(c.before).toBeNull();
    expect(c.oldKey).toBeNull();
    expect(c.after.body).toBe(UNCHANGED_TOAST);
    expect(c.key).toEqual({ id: 7n });
  });

  it('update with a changed key (K): before and oldKey are the old key columns', () => {
    const c = updateChange(entry, { tag: 'update', relationId: 16384, oldKind: 'key', oldTuple: [t('7'), NULL, NULL], newTuple: [t('8'), t('x'), t('4')] });
    expect(c.before).toEqual({ id: 7n });
    expect(c.oldKey).toEqual({ id: 7n });
    expect(c.key).toEqual({ id: 8n });
  });

  it('update with K but the same key (out-of-line key value): no oldKey', () => {
    const c = updateChange(entry, { tag: 'update', relationId: 16384, oldKind: 'key', oldTuple: [t('7'), NULL, NULL], newTuple: [t('7'), t('x'), t('4')] });
    expect(c.oldKey).toBeNull();
  });

  it('REPLICA IDENTITY FULL: unchanged TOAST is filled from the old row', () => {
    const c = updateChange(full, { tag: 'update', relationId: 16390, oldKind: 'old', oldTuple: [t('7'), t('long text'), t('1')], newTuple: [t('7'), TOAST, t('2')] });
    expect(c.before).toEqual({ id: 7n, body: 'long text', n: 1 });
    expect(c.after).toEqual({ id: 7n, body: 'long text', n: 2 });
    // pgoutput flags every column as identity under FULL, so the key is the whole row.
    expect(c.key).toEqual({ id: 7n, body: 'long text', n: 2 });
    expect(c.oldKey).toEqual({ id: 7n, body: 'long text', n: 1 });
  });

  it('REPLICA IDENTITY FULL without the value in the old row keeps the marker', () => {
    const c = updateChange(full, { tag: 'update', relationId: 16390, oldKind: 'old', oldTuple: [t('7'), TOAST, t('1')], newTuple: [t('7'), TOAST, t('2')] });
    expect(c.after.body).toBe(UNCHANGED_TOAST);
  });

  it('delete: key-only before for default identity, full row for FULL', () => {
    expect(deleteChange(entry, { tag: 'delete', relationId: 16384, oldKind: 'key', oldTuple: [t('7'), NULL, NULL] })).toMatchObject({ before: { id: 7n }, key: { id: 7n } });
    const d = deleteChange(full, { tag: 'delete', relationId: 16390, oldKind: 'old', oldTuple: [t('7'), t('b'), t('1')] });
    expect(d.before).toEqual({ id: 7n, body: 'b', n: 1 });
  });

  it('truncate names the tables; unknown relation ids and width mismatches are protocol errors', () => {
    expect(truncateChange(registry, { tag: 'truncate', cascade: false, restartIdentity: true, relationIds: [16384, 16390] }))
      .toEqual({ op: 'truncate', tables: ['public.invoice', 'public.doc'], cascade: false, restartIdentity: true });
    expect(() => truncateChange(registry, { tag: 'truncate', cascade: false, restartIdentity: false, relationIds: [1] })).toThrow(/before its Relation message/);
    expect(() => insertChange(entry, { tag: 'insert', relationId: 16384, newTuple: [t('1')] })).toThrow(/has 1 column\(s\), relation version 1 has 3/);
  });
});
