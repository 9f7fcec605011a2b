/**
 * Binary encoding of {@link Change}s for spill files. Round-trips exactly what decoded rows hold:
 * null, undefined, booleans, numbers (incl. NaN/±Infinity/-0), bigint, strings, Buffers,
 * {@link UNCHANGED_TOAST}, arrays and plain objects (parsed JSON, rows) nested to any depth.
 * {@link RelationVersion} objects are written once per buffer as references (a change's
 * `relation`, a SchemaChange's `previous`/`current`) and resolved on read.
 *
 * File layout: records of `[u32 LE byteLength][u32 LE xid][u8 kind][body]`, appended in change
 * order; `xid` is the (sub)transaction that produced the change, so aborted subtransactions can
 * be skipped on read. Kind `0`: a {@link Change} as a tagged value. Kind `1`: a row message as
 * pgoutput sent it (relation version reference, old/new tuples of text) — converted to a Change
 * only when read back, so a spilling transaction allocates no rows on the capture path (rows
 * built there and dropped at once would be pretenured garbage after an in-memory phase, see
 * the buffer's module comment).
 */
import { deleteChange, insertChange, updateChange, type ChangeBuilders } from '../source/changes.js';
import type { DeleteMessage, InsertMessage, TupleData, TupleValue, UpdateMessage } from '../source/pgoutput/messages.js';
import { createRelationEntry, type RelationEntry } from '../source/relations.js';
import { EventAssemblerError } from '../errors.js';
import { UNCHANGED_TOAST, type Change, type RelationVersion } from '../source/types.js';

const corrupt = (message: string) => new EventAssemblerError('BUFFER_SPILL_CORRUPT', `corrupt spill record: ${message}`);

const K_CHANGE = 0, K_ROW = 1;

/** Own allocation sites for changes read back (see {@link ChangeBuilders}). */
const readBackBuilders: ChangeBuilders = {
  insert: (relation, after, key) => ({ op: 'insert', table: relation.table, relation, after, key }),
  update: (relation, before, after, key, oldKey) => ({ op: 'update', table: relation.table, relation, before, after, key, oldKey }),
  delete: (relation, before, key) => ({ op: 'delete', table: relation.table, relation, before, key }),
};
const ROW_INSERT = 0, ROW_UPDATE = 1, ROW_DELETE = 2;
const OLD_NONE = 0, OLD_KEY = 1, OLD_FULL = 2;
const NULL_VALUE: TupleValue = Object.freeze({ kind: 'null' });
const TOAST_VALUE: TupleValue = Object.freeze({ kind: 'unchanged-toast' });

const T_NULL = 0, T_UNDEFINED = 1, T_FALSE = 2, T_TRUE = 3, T_FLOAT = 4, T_INT = 5, T_BIGINT = 6,
  T_STRING = 7, T_BUFFER = 8, T_TOAST = 9, T_ARRAY = 10, T_OBJECT = 11, T_RELATION = 12;

/** Relation versions referenced by spilled records, shared by one buffer's writers and readers. */
export interface RelationTable {
  idOf(relation: RelationVersion): number | undefined;
  register(relation: RelationVersion): number;
  get(id: number): RelationVersion;
  /** The decoders of a registered version (built once). */
  entry(id: number): RelationEntry;
}

export function createRelationTable(): RelationTable {
  const ids = new Map<RelationVersion, number>();
  const list: RelationVersion[] = [];
  const entries: RelationEntry[] = [];
  return {
    idOf: (r) => ids.get(r),
    register(r) {
      let id = ids.get(r);
      if (id === undefined) { id = list.length; list.push(r); ids.set(r, id); }
      return id;
    },
    get(id) {
      const r = list[id];
      if (r === undefined) throw corrupt(`unknown relation version #${id}`);
      return r;
    },
    entry(id) {
      return (entries[id] ??= createRelationEntry(this.get(id)));
    },
  };
}

const RELATION_FIELDS = new Set(['relation', 'previous', 'current']);

/** Appends encoded records to a growable buffer; {@link take} hands the bytes over. */
export class RecordWriter {
  private buf: Buffer;
  private pos = 0;

  constructor(private readonly relations: RelationTable, initialBytes = 1 << 16) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  get length(): number { return this.pos; }

  /** Encodes one Change record. */
  write(xid: number, change: Change): void {
    const start = this.begin(xid, K_CHANGE);
    this.value(change, false);
    this.buf.writeUInt32LE(this.pos - start - 4, start);
  }

  /** Encodes one row message record, to be converted with `relation`'s decoders when read. */
  writeRow(xid: number, message: InsertMessage | UpdateMessage | DeleteMessage, relation: RelationVersion): void {
    const start = this.begin(xid, K_ROW);
    this.ensure(6);
    this.buf.writeUInt32LE(this.relations.register(relation), this.pos);
    this.pos += 4;
    if (message.tag === 'insert') {
      this.buf[this.pos++] = ROW_INSERT;
      this.buf[this.pos++] = OLD_NONE;
      this.tuple(message.newTuple);
    } else if (message.tag === 'update') {
      this.buf[this.pos++] = ROW_UPDATE;
      this.buf[this.pos++] = message.oldTuple === null ? OLD_NONE : message.oldKind === 'old' ? OLD_FULL : OLD_KEY;
      if (message.oldTuple !== null) this.tuple(message.oldTuple);
      this.tuple(message.newTuple);
    } else {
      this.buf[this.pos++] = ROW_DELETE;
      this.buf[this.pos++] = message.oldKind === 'old' ? OLD_FULL : OLD_KEY;
      this.tuple(message.oldTuple);
    }
    this.buf.writeUInt32LE(this.pos - start - 4, start);
  }

  private begin(xid: number, kind: number): number {
    this.ensure(9);
    const start = this.pos;
    this.buf.writeUInt32LE(xid >>> 0, start + 4);
    this.buf[start + 8] = kind;
    this.pos += 9;
    return start;
  }

  private tuple(t: TupleData): void {
    this.ensure(2);
    this.buf.writeUInt16LE(t.length, this.pos);
    this.pos += 2;
    for (let i = 0; i < t.length; i++) {
      const v = t[i]!;
      if (v.kind === 'text') { this.u8(T_STRING); this.string(v.value); }
      else if (v.kind === 'null') this.u8(T_NULL);
      else if (v.kind === 'unchanged-toast') this.u8(T_TOAST);
      else { this.u8(T_BUFFER); this.u32(v.value.length); this.ensure(v.value.length); this.buf.set(v.value, this.pos); this.pos += v.value.length; }
    }
  }

  /** Drops the internal buffer (a later write allocates a small one again). */
  release(): void {
    this.buf = Buffer.alloc(0);
    this.pos = 0;
  }

  /** The encoded bytes so far (a view, valid until the next write); resets the writer. */
  take(): Buffer {
    const out = this.buf.subarray(0, this.pos);
    this.pos = 0;
    return out;
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = Math.max(this.buf.length * 2, 1024);
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  private u8(v: number): void { this.ensure(1); this.buf[this.pos++] = v; }
  private u32(v: number): void { this.ensure(4); this.buf.writeUInt32LE(v, this.pos); this.pos += 4; }

  private string(s: string): void {
    this.ensure(4 + s.length * 3);
    const n = this.buf.write(s, this.pos + 4, 'utf8');
    this.buf.writeUInt32LE(n, this.pos);
    this.pos += 4 + n;
  }

  private value(v: unknown, relationField: boolean): void {
    switch (typeof v) {
      case 'string': this.u8(T_STRING); this.string(v); return;
      case 'number':
        if ((v | 0) === v && !Object.is(v, -0)) { this.ensure(5); this.buf[this.pos++] = T_INT; this.buf.writeInt32LE(v, this.pos); this.pos += 4; }
        else { this.ensure(9); this.buf[this.pos++] = T_FLOAT; this.buf.writeDoubleLE(v, this.pos); this.pos += 8; }
        return;
      case 'boolean': this.u8(v ? T_TRUE : T_FALSE); return;
      case 'bigint': this.u8(T_BIGINT); this.string(v.toString()); return;
      case 'undefined': this.u8(T_UNDEFINED); return;
      case 'symbol':
        if (v === UNCHANGED_TOAST) { this.u8(T_TOAST); return; }
        throw new TypeError(`cannot spill symbol ${String(v)}`);
      case 'object': {
        if (v === null) { this.u8(T_NULL); return; }
        if (Buffer.isBuffer(v) || v instanceof Uint8Array) {
          this.u8(T_BUFFER); this.u32(v.length); this.ensure(v.length);
          this.buf.set(v, this.pos); this.pos += v.length;
          return;
        }
        if (Array.isArray(v)) {
          this.u8(T_ARRAY); this.u32(v.length);
          for (let i = 0; i < v.length; i++) this.value(v[i], false);
          return;
        }
        if (relationField) {
          this.u8(T_RELATION); this.u32(this.relations.register(v as RelationVersion));
          return;
        }
        const keys = Object.keys(v);
        this.u8(T_OBJECT); this.u32(keys.length);
        for (const k of keys) {
          this.string(k);
          this.value((v as Record<string, unknown>)[k], RELATION_FIELDS.has(k) && isChangeLike(v));
        }
        return;
      }
      default:
        throw new TypeError(`cannot spill a ${typeof v}`);
    }
  }
}

// Only a Change's own `relation`/`previous`/`current` are relation references; a JSON column
// value with a key named `relation` is data.
function isChangeLike(v: object): boolean {
  return typeof (v as { op?: unknown }).op === 'string' && 'table' in v;
}

/** Decodes records from a buffer holding whole records. */
export class RecordReader {
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;

  constructor(private readonly relations: RelationTable) {}

  /** Decodes the record body at `start` (after the length prefix) of `buf`, ending at `end`. */
  read(buf: Buffer, start: number, end: number): { xid: number; change: Change } {
    this.buf = buf;
    this.pos = start;
    const xid = buf.readUInt32LE(this.pos);
    const kind = buf[this.pos + 4];
    this.pos += 5;
    const change = kind === K_ROW ? this.row() : this.value() as Change;
    if (this.pos !== end) throw corrupt(`decoded ${this.pos - start} of ${end - start} bytes`);
    return { xid, change };
  }

  private u32(): number { const v = this.buf.readUInt32LE(this.pos); this.pos += 4; return v; }

  private row(): Change {
    const entry = this.relations.entry(this.u32());
    const op = this.buf[this.pos++];
    const old = this.buf[this.pos++];
    const relationId = entry.version.relationId;
    if (op === ROW_INSERT) return insertChange(entry, { tag: 'insert', relationId, newTuple: this.tuple() }, readBackBuilders);
    if (op === ROW_UPDATE) {
      const oldTuple = old === OLD_NONE ? null : this.tuple();
      return updateChange(entry, { tag: 'update', relationId, oldKind: old === OLD_NONE ? null : old === OLD_FULL ? 'old' : 'key', oldTuple, newTuple: this.tuple() }, readBackBuilders);
    }
    return deleteChange(entry, { tag: 'delete', relationId, oldKind: old === OLD_FULL ? 'old' : 'key', oldTuple: this.tuple() }, readBackBuilders);
  }

  private tuple(): TupleData {
    const n = this.buf.readUInt16LE(this.pos);
    this.pos += 2;
    const t = new Array<TupleValue>(n);
    for (let i = 0; i < n; i++) {
      const tag = this.buf[this.pos++];
      if (tag === T_STRING) t[i] = { kind: 'text', value: this.string() };
      else if (tag === T_NULL) t[i] = NULL_VALUE;
      else if (tag === T_TOAST) t[i] = TOAST_VALUE;
      else if (tag === T_BUFFER) {
        const len = this.u32();
        t[i] = { kind: 'binary', value: Buffer.from(this.buf.subarray(this.pos, this.pos + len)) };
        this.pos += len;
      } else throw corrupt(`unknown tuple tag ${String(tag)}`);
    }
    return t;
  }

  private string(): string {
    const n = this.u32();
    const s = this.buf.toString('utf8', this.pos, this.pos + n);
    this.pos += n;
    return s;
  }

  private value(): unknown {
    const tag = this.buf[this.pos++];
    switch (tag) {
      case T_NULL: return null;
      case T_UNDEFINED: return undefined;
      case T_FALSE: return false;
      case T_TRUE: return true;
      case T_INT: { const v = this.buf.readInt32LE(this.pos); this.pos += 4; return v; }
      case T_FLOAT: { const v = this.buf.readDoubleLE(this.pos); this.pos += 8; return v; }
      case T_BIGINT: return BigInt(this.string());
      case T_STRING: return this.string();
      case T_BUFFER: {
        const n = this.u32();
        const b = Buffer.from(this.buf.subarray(this.pos, this.pos + n)); // own copy: the read chunk is reused
        this.pos += n;
        return b;
      }
      case T_TOAST: return UNCHANGED_TOAST;
      case T_ARRAY: {
        const n = this.u32();
        const a = new Array<unknown>(n);
        for (let i = 0; i < n; i++) a[i] = this.value();
        return a;
      }
      case T_OBJECT: {
        const n = this.u32();
        const o: Record<string, unknown> = {};
        for (let i = 0; i < n; i++) {
          const k = this.string();
          o[k] = this.value();
        }
        return o;
      }
      case T_RELATION: return this.relations.get(this.u32());
      default:
        throw corrupt(`unknown tag ${String(tag)} at ${this.pos - 1}`);
    }
  }
}
