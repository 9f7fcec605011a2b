import { describe, expect, it } from 'vitest';
import { PgoutputDecodeError } from '../../src/errors.js';
import { createPgoutputDecoder, decodePgoutput, decodePgoutputAt, pgTimestampToIso } from '../../src/source/pgoutput/decoder.js';
import { encodePgoutput, isoToPgMicros } from '../../src/source/pgoutput/encoder.js';
import type { PgoutputMessage } from '../../src/source/pgoutput/messages.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('decodePgoutput: hand-built payloads', () => {
  it('Begin: final LSN, commit time at the PostgreSQL epoch, xid', () => {
    // B | 00000016 B374D848 | 0000000000000000 | 000002EA
    expect(decodePgoutput(hex('42 00000016b374d848 0000000000000000 000002ea'))).toEqual({
      tag: 'begin', finalLsn: '16/B374D848', commitTime: '2000-01-01T00:00:00.000000Z', xid: 746,
    });
  });

  it('Commit: flags, commit/end LSN, commit time with microseconds', () => {
    // 1 µs after the epoch
    expect(decodePgoutput(hex('43 00 0000000000000100 0000000000000130 0000000000000001'))).toEqual({
      tag: 'commit', flags: 0, commitLsn: '0/100', endLsn: '0/130', commitTime: '2000-01-01T00:00:00.000001Z',
    });
  });

  it('Begin and Commit of one transaction share the commit time; the next transaction has its own', () => {
    // The decoder keeps the last timestamp's text for the next message with the same value.
    const at = (micros: bigint) => micros.toString(16).padStart(16, '0');
    const t1 = isoToPgMicros('2026-12-06T01:02:03.000004Z');
    const t2 = t1 + 1n;
    const t3 = isoToPgMicros('2026-12-07T00:00:00.000000Z');
    const begin = (t: bigint) => decodePgoutput(hex(`42 0000000000000100 ${at(t)} 00000001`));
    const commit = (t: bigint) => decodePgoutput(hex(`43 00 0000000000000100 0000000000000130 ${at(t)}`));
    expect([begin(t1), commit(t1), begin(t2), commit(t2), begin(t3), begin(t1)].map((m) => (m as { commitTime: string }).commitTime)).toEqual([
      '2026-12-06T01:02:03.000004Z',
      '2026-12-06T01:02:03.000004Z',
      '2026-12-06T01:02:03.000005Z',
      '2026-12-06T01:02:03.000005Z',
      '2026-12-07T00:00:00.000000Z',
      '2026-12-06T01:02:03.000004Z',
    ]);
  });

  it('Insert: relation id and a tuple with text, null, unchanged-toast and binary columns', () => {
    const payload = hex(`49 00004001 4e 0004
      74 00000002 3432
      6e
      75
      62 00000003 010203`);
    expect(decodePgoutput(payload)).toEqual({
      tag: 'insert', xid: undefined, relationId: 0x4001,
      newTuple: [{ kind: 'text', value: '42' }, { kind: 'null' }, { kind: 'unchanged-toast' }, { kind: 'binary', value: Buffer.from([1, 2, 3]) }],
    });
  });

  it('Insert in a stream block: the xid follows the tag', () => {
    const payload = hex('49 000003e8 00004001 4e 0001 74 00000001 78');
    expect(decodePgoutput(payload, { streaming: true })).toMatchObject({ tag: 'insert', xid: 1000, relationId: 0x4001, newTuple: [{ kind: 'text', value: 'x' }] });
  });

  it('Relation: empty namespace means pg_catalog; replica identity and column flags', () => {
    const payload = Buffer.concat([
      hex('52 00000010'), Buffer.from('\0pg_class\0'), hex('66 0002'),
      hex('01'), Buffer.from('id\0'), hex('00000017 ffffffff'),
      hex('00'), Buffer.from('nåme\0'), hex('00000413 0000000e'),
    ]);
    expect(decodePgoutput(payload)).toEqual({
      tag: 'relation', xid: undefined, relationId: 16, schema: 'pg_catalog', name: 'pg_class', replicaIdentity: 'full',
      columns: [{ flags: 1, name: 'id', typeOid: 23, typeModifier: -1 }, { flags: 0, name: 'nåme', typeOid: 1043, typeModifier: 14 }],
    });
  });

  it('Stream Abort and Stream Start/Stop', () => {
    expect(decodePgoutput(hex('41 000003e8 000003e9'))).toEqual({ tag: 'stream-abort', xid: 1000, subXid: 1001 });
    expect(decodePgoutput(hex('53 000003e8 01'))).toEqual({ tag: 'stream-start', xid: 1000, firstSegment: true });
    expect(decodePgoutput(hex('53 000003e8 00'))).toEqual({ tag: 'stream-start', xid: 1000, firstSegment: false });
    expect(decodePgoutput(hex('45'))).toEqual({ tag: 'stream-stop' });
  });

  it('fails loudly on truncated payloads, unknown tags and tuple kinds', () => {
    expect(() => decodePgoutput(hex('42 0000'))).toThrow(PgoutputDecodeError);
    expect(() => decodePgoutput(hex('5a'))).toThrow(/unknown pgoutput message tag 'Z'/);
    expect(() => decodePgoutput(hex('49 00004001 4e 0001 78'))).toThrow(/unknown tuple column kind 'x'/);
    expect(() => decodePgoutput(hex('49 00004001 4e 0001 74 00000005 41'))).toThrow(/truncated/);
    expect(() => decodePgoutput(Buffer.alloc(0))).toThrow(/empty/);
    try {
      decodePgoutput(hex('43 00'));
    } catch (e) {
      expect((e as PgoutputDecodeError).code).toBe('PGOUTPUT_DECODE_FAILED');
    }
  });
});

describe('decodePgoutput: every message kind round-trips through the encoder', () => {
  const t = '2024-05-06T07:08:09.123456Z';
  const tuple = [{ kind: 'text', value: 'a' }, { kind: 'null' }] as const;
  const plain: PgoutputMessage[] = [
    { tag: 'begin', finalLsn: 'FFFFFFFF/FFFFFFFF', commitTime: t, xid: 4294967295 },
    { tag: 'commit', flags: 0, commitLsn: '1/A', endLsn: '1/B0', commitTime: t },
    { tag: 'origin', originLsn: 'AB/CD', name: 'node_a' },
    { tag: 'relation', xid: undefined, relationId: 16384, schema: 'public', name: 'invoice', replicaIdentity: 'default', columns: [{ flags: 1, name: 'id', typeOid: 20, typeModifier: -1 }] },
    { tag: 'relation', xid: undefined, relationId: 16385, schema: 'sales', name: 'line', replicaIdentity: 'index', columns: [] },
    { tag: 'relation', xid: undefined, relationId: 16386, schema: 'public', name: 'n', replicaIdentity: 'nothing', columns: [] },
    { tag: 'type', xid: undefined, typeOid: 90000, schema: 'public', name: 'invoice_status' },
    { tag: 'insert', xid: undefined, relationId: 16384, newTuple: [...tuple] },
    { tag: 'update', xid: undefined, relationId: 16384, oldKind: null, oldTuple: null, newTuple: [...tuple] },
    { tag: 'update', xid: undefined, relationId: 16384, oldKind: 'key', oldTuple: [{ kind: 'text', value: 'k' }, { kind: 'null' }], newTuple: [...tuple] },
    { tag: 'update', xid: undefined, relationId: 16384, oldKind: 'old', oldTuple: [...tuple], newTuple: [{ kind: 'text', value: 'b' }, { kind: 'unchanged-toast' }] },
    { tag: 'delete', xid: undefined, relationId: 16384, oldKind: 'key', oldTuple: [...tuple] },
    { tag: 'delete', xid: undefined, relationId: 16384, oldKind: 'old', oldTuple: [...tuple] },
    { tag: 'truncate', xid: undefined, cascade: true, restartIdentity: false, relationIds: [16384, 16385] },
    { tag: 'truncate', xid: undefined, cascade: false, restartIdentity: true, relationIds: [16384] },
    { tag: 'message', xid: undefined, transactional: true, lsn: '0/16B3748', prefix: 'watermark', content: Buffer.from('{"low":1}') },
    { tag: 'message', xid: undefined, transactional: false, lsn: '0/16B3750', prefix: '', content: Buffer.alloc(0) },
    { tag: 'stream-start', xid: 77, firstSegment: true },
    { tag: 'stream-stop' },
    { tag: 'stream-commit', xid: 77, flags: 0, commitLsn: '0/3000', endLsn: '0/3030', commitTime: t },
    { tag: 'stream-abort', xid: 77, subXid: 78 },
  ];
  it.each(plain.map((m, i) => [i, m.tag, m] as const))('#%i %s', (_i, _tag, message) => {
    expect(decodePgoutput(encodePgoutput(message))).toEqual(message);
  });

  // As the replication connection decodes: in place, after the XLogData header (25 bytes).
  const inChunk = (payload: Buffer) => Buffer.concat([Buffer.alloc(25, 0x77), payload]);
  it('every message decodes alike in place, after a header, as on its own', () => {
    for (const message of plain) expect(decodePgoutputAt(inChunk(encodePgoutput(message)), 25, false)).toEqual(message);
    for (const message of streamed) expect(decodePgoutputAt(inChunk(encodePgoutput(message, { streaming: true })), 25, true)).toEqual(message);
  });

  it('in place, errors count offsets and length from the message, not the chunk', () => {
    const errorOf = (payload: Buffer, start: number) => {
      try {
        decodePgoutputAt(start === 0 ? payload : inChunk(payload), start, false);
      } catch (error) {
        return [(error as PgoutputDecodeError).message, (error as PgoutputDecodeError).details];
      }
      throw new Error('no error');
    };
    for (const bad of ['49 00004001 4e 0001 74 00000005 41', '49 00004001 4e 0001 78', '52 00004001 7075626c6963', '42 0000']) {
      expect(errorOf(hex(bad), 25)).toEqual(errorOf(hex(bad), 0));
    }
    expect(errorOf(hex('49 00004001 4e 0001 74 00000005 41'), 25)[0]).toMatch(/need 5 byte\(s\) at offset 13, length 14/);
    expect(() => decodePgoutputAt(Buffer.alloc(25), 25, false)).toThrow(/empty/);
  });

  it('in place with an end: messages followed by other bytes decode alike, and a truncated one does not read past its end', () => {
    // A socket chunk: header, message, then the next message's bytes (here: a whole valid Insert).
    const next = encodePgoutput({ tag: 'insert', xid: undefined, relationId: 1, newTuple: [{ kind: 'text', value: 'next message' }] });
    for (const message of plain) {
      const payload = encodePgoutput(message);
      expect(decodePgoutputAt(Buffer.concat([inChunk(payload), next]), 25, false, 25 + payload.length)).toEqual(message);
    }
    const errorOf = (payload: Buffer, end?: number) => {
      try {
        decodePgoutputAt(end === undefined ? payload : Buffer.concat([inChunk(payload), next]), end === undefined ? 0 : 25, false, end);
      } catch (error) {
        return [(error as PgoutputDecodeError).message, (error as PgoutputDecodeError).details];
      }
      throw new Error('no error');
    };
    // Truncated column value, truncated kind, unterminated string (the next bytes hold a 0), nothing.
    for (const bad of ['49 00004001 4e 0001 74 00000005 41', '49 00004001 4e 0001', '52 00004001 7075626c6963', '42 0000']) {
      expect(errorOf(hex(bad), 25 + hex(bad).length)).toEqual(errorOf(hex(bad)));
    }
    expect(() => decodePgoutputAt(Buffer.concat([Buffer.alloc(25), next]), 25, false, 25)).toThrow(/empty/);
  });

  const streamed: PgoutputMessage[] = [
    { tag: 'relation', xid: 78, relationId: 16384, schema: 'public', name: 'invoice', replicaIdentity: 'full', columns: [{ flags: 1, name: 'id', typeOid: 20, typeModifier: -1 }] },
    { tag: 'type', xid: 78, typeOid: 90000, schema: 'public', name: 'invoice_status' },
    { tag: 'insert', xid: 78, relationId: 16384, newTuple: [...tuple] },
    { tag: 'update', xid: 77, relationId: 16384, oldKind: 'old', oldTuple: [...tuple], newTuple: [...tuple] },
    { tag: 'delete', xid: 77, relationId: 16384, oldKind: 'key', oldTuple: [...tuple] },
    { tag: 'truncate', xid: 79, cascade: true, restartIdentity: true, relationIds: [1] },
    { tag: 'message', xid: 77, transactional: true, lsn: '0/1', prefix: 'p', content: Buffer.from([0, 255]) },
  ];
  it.each(streamed.map((m, i) => [i, m.tag, m] as const))('streaming #%i %s carries its xid', (_i, _tag, message) => {
    const payload = encodePgoutput(message, { streaming: true });
    expect(decodePgoutput(payload, { streaming: true })).toEqual(message);
    // Decoded without the streaming flag the xid would be misread as the relation id: the wrapper exists for that.
    expect(payload.length).toBe(encodePgoutput({ ...message, xid: undefined } as PgoutputMessage).length + 4);
  });
});

describe('createPgoutputDecoder', () => {
  it('reads xids only between Stream Start and Stream Stop', () => {
    const decoder = createPgoutputDecoder();
    const insert = (xid?: number) => ({ tag: 'insert', xid, relationId: 5, newTuple: [{ kind: 'text', value: '1' }] }) as const;
    expect(decoder.decode(encodePgoutput(insert()))).toEqual(insert());
    expect(decoder.decode(encodePgoutput({ tag: 'stream-start', xid: 900, firstSegment: true }))).toMatchObject({ tag: 'stream-start' });
    expect(decoder.inStream).toBe(true);
    expect(decoder.decode(encodePgoutput(insert(901), { streaming: true }))).toEqual(insert(901));
    decoder.decode(encodePgoutput({ tag: 'stream-stop' }));
    expect(decoder.inStream).toBe(false);
    expect(decoder.decode(encodePgoutput(insert()))).toEqual(insert());
    // Stream Commit/Abort arrive outside the block and carry their xid themselves.
    expect(decoder.decode(encodePgoutput({ tag: 'stream-abort', xid: 900, subXid: 900 }))).toEqual({ tag: 'stream-abort', xid: 900, subXid: 900 });
  });

  it('decodeAt: in place from an offset, with the same Stream Start/Stop tracking', () => {
    const decoder = createPgoutputDecoder();
    const at = (payload: Buffer) => decoder.decodeAt(Buffer.concat([Buffer.alloc(25), payload]), 25);
    const insert = (xid?: number) => ({ tag: 'insert', xid, relationId: 5, newTuple: [{ kind: 'text', value: '1' }] }) as const;
    expect(at(encodePgoutput(insert()))).toEqual(insert());
    at(encodePgoutput({ tag: 'stream-start', xid: 900, firstSegment: true }));
    expect(decoder.inStream).toBe(true);
    expect(at(encodePgoutput(insert(901), { streaming: true }))).toEqual(insert(901));
    at(encodePgoutput({ tag: 'stream-stop' }));
    expect(at(encodePgoutput(insert()))).toEqual(insert());
  });
});

describe('pgTimestampToIso', () => {
  const cases = [
    '2000-01-01T00:00:00.000000Z', '1999-12-31T23:59:59.999999Z', '1970-01-01T00:00:00.000001Z',
    '2024-02-29T12:34:56.789012Z', '2262-04-11T23:47:16.854775Z', '1900-01-01T00:00:00.500000Z',
  ];
  it.each(cases)('%s', (iso) => {
    const v = isoToPgMicros(iso);
    const b = Buffer.alloc(8);
    b.writeBigInt64BE(v);
    expect(pgTimestampToIso(b.readInt32BE(0), b.readUInt32BE(4))).toBe(iso);
  });
  it('runs of nearby times (the cached day), day boundaries and jumps back: as Date#toISOString with microseconds', () => {
    const reference = (micros: bigint): string => {
      const ms = micros / 1000n - (micros % 1000n < 0n ? 1n : 0n);
      const rest = micros - ms * 1000n;
      return `${new Date(Number(ms) + 946_684_800_000).toISOString().slice(0, -1)}${String(rest).padStart(3, '0')}Z`;
    };
    const b = Buffer.alloc(8);
    let seed = 7;
    const random = (): number => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    let t = isoToPgMicros('2026-12-06T23:59:58.000000Z');
    for (let i = 0; i < 20_000; i++) {
      // Mostly small steps forward (a few across midnight), sometimes a jump back by up to two days.
      t += i % 500 === 499 ? -BigInt(Math.floor(random() * 172_800_000_000)) : BigInt(Math.floor(random() * 400_000_000));
      b.writeBigInt64BE(t);
      expect(pgTimestampToIso(b.readInt32BE(0), b.readUInt32BE(4))).toBe(reference(t));
    }
  });
  it('infinity', () => {
    expect(pgTimestampToIso(0x7fffffff, 0xffffffff)).toBe('infinity');
    expect(pgTimestampToIso(-0x80000000, 0)).toBe('-infinity');
  });
});
