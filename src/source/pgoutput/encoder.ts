/**
 * Encoder of pgoutput messages — the inverse of {@link decodePgoutput}. Not on the capture path:
 * it builds payloads for tests, benchmarks and fake replication servers.
 */
import type { Lsn, ReplicaIdentity } from '../types.js';
import type { PgoutputMessage, TupleData } from './messages.js';

const PG_EPOCH_MS = 946_684_800_000n;

class Out {
  private buf = Buffer.allocUnsafe(256);
  private pos = 0;
  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
  byte(v: number): this { this.ensure(1); this.buf[this.pos++] = v; return this; }
  i16(v: number): this { this.ensure(2); this.pos = this.buf.writeInt16BE(v, this.pos); return this; }
  u32(v: number): this { this.ensure(4); this.pos = this.buf.writeUInt32BE(v >>> 0, this.pos); return this; }
  i32(v: number): this { this.ensure(4); this.pos = this.buf.writeInt32BE(v, this.pos); return this; }
  i64(v: bigint): this { this.ensure(8); this.pos = this.buf.writeBigInt64BE(v, this.pos); return this; }
  lsn(v: Lsn): this { this.ensure(8); this.pos = this.buf.writeBigUInt64BE(lsnToBigInt(v), this.pos); return this; }
  time(iso: string): this { return this.i64(isoToPgMicros(iso)); }
  cstring(s: string): this { this.ensure(s.length * 3 + 1); this.pos += this.buf.write(s, this.pos, 'utf8'); this.buf[this.pos++] = 0; return this; }
  bytes(b: Buffer): this { this.ensure(b.length); b.copy(this.buf, this.pos); this.pos += b.length; return this; }
  xid(xid: number | undefined, streaming: boolean): this { return streaming && xid !== undefined ? this.u32(xid) : this; }
  tuple(t: TupleData): this {
    this.i16(t.length);
    for (const v of t) {
      if (v.kind === 'null') this.byte(0x6e);
      else if (v.kind === 'unchanged-toast') this.byte(0x75);
      else {
        if (v.kind === 'binary') { this.byte(0x62).i32(v.value.length).bytes(v.value); continue; }
        this.byte(0x74);
        this.ensure(4 + v.value.length * 3);
        const n = this.buf.write(v.value, this.pos + 4, 'utf8');
        this.pos = this.buf.writeInt32BE(n, this.pos) + n;
      }
    }
    return this;
  }
  done(): Buffer { return Buffer.from(this.buf.subarray(0, this.pos)); }
}

/** `16/B374D848` → 64-bit value. */
export function lsnToBigInt(lsn: Lsn): bigint {
  const [hi, lo] = lsn.split('/');
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`);
}

/** `…T10:00:00.123456Z` → microseconds since 2000-01-01 (PostgreSQL TimestampTz). */
export function isoToPgMicros(iso: string): bigint {
  if (iso === 'infinity') return 0x7fffffffffffffffn;
  if (iso === '-infinity') return -0x8000000000000000n;
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$/.exec(iso);
  if (m === null) throw new Error(`not an ISO UTC timestamp with microseconds: ${iso}`);
  const seconds = BigInt(Date.parse(`${m[1]}Z`)) / 1000n;
  const micros = BigInt((m[2] ?? '').padEnd(6, '0'));
  return (seconds * 1000n - PG_EPOCH_MS) * 1000n + micros;
}

const REPLICA_IDENTITY_CODE: Record<ReplicaIdentity, number> = { default: 0x64, nothing: 0x6e, full: 0x66, index: 0x69 };

/** Encodes a message; `streaming` adds the xid of row/relation/type/truncate/message messages. */
export function encodePgoutput(message: PgoutputMessage, opts?: { streaming?: boolean }): Buffer {
  const s = opts?.streaming === true;
  const o = new Out();
  switch (message.tag) {
    case 'begin': return o.byte(0x42).lsn(message.finalLsn).time(message.commitTime).u32(message.xid).done();
    case 'commit': return o.byte(0x43).byte(message.flags).lsn(message.commitLsn).lsn(message.endLsn).time(message.commitTime).done();
    case 'origin': return o.byte(0x4f).lsn(message.originLsn).cstring(message.name).done();
    case 'relation': {
      o.byte(0x52).xid(message.xid, s).u32(message.relationId)
        .cstring(message.schema === 'pg_catalog' ? '' : message.schema).cstring(message.name)
        .byte(REPLICA_IDENTITY_CODE[message.replicaIdentity]).i16(message.columns.length);
      for (const c of message.columns) o.byte(c.flags).cstring(c.name).u32(c.typeOid).i32(c.typeModifier);
      return o.done();
    }
    case 'type': return o.byte(0x59).xid(message.xid, s).u32(message.typeOid).cstring(message.schema === 'pg_catalog' ? '' : message.schema).cstring(message.name).done();
    case 'insert': return o.byte(0x49).xid(message.xid, s).u32(message.relationId).byte(0x4e).tuple(message.newTuple).done();
    case 'update':
      o.byte(0x55).xid(message.xid, s).u32(message.relationId);
      if (message.oldTuple !== null) o.byte(message.oldKind === 'old' ? 0x4f : 0x4b).tuple(message.oldTuple);
      return o.byte(0x4e).tuple(message.newTuple).done();
    case 'delete': return o.byte(0x44).xid(message.xid, s).u32(message.relationId).byte(message.oldKind === 'old' ? 0x4f : 0x4b).tuple(message.oldTuple).done();
    case 'truncate': {
      o.byte(0x54).xid(message.xid, s).u32(message.relationIds.length).byte((message.cascade ? 1 : 0) | (message.restartIdentity ? 2 : 0));
      for (const id of message.relationIds) o.u32(id);
      return o.done();
    }
    case 'message':
      return o.byte(0x4d).xid(message.xid, s).byte(message.transactional ? 1 : 0).lsn(message.lsn).cstring(message.prefix)
        .u32(message.content.length).bytes(message.content).done();
    case 'stream-start': return o.byte(0x53).u32(message.xid).byte(message.firstSegment ? 1 : 0).done();
    case 'stream-stop': return o.byte(0x45).done();
    case 'stream-commit': return o.byte(0x63).u32(message.xid).byte(message.flags).lsn(message.commitLsn).lsn(message.endLsn).time(message.commitTime).done();
    case 'stream-abort': return o.byte(0x41).u32(message.xid).u32(message.subXid).done();
  }
}
