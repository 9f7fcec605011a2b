import { describe, expect, it } from 'vitest';
import {
  decodeBytea, decodeDate, decodeTextValue, decodeTimestamp, decodeTimestamptz, decodeTimestamptzSlow, decoderForType, parseArrayLiteral,
  TypeOid, ValueDecodeError,
} from '../../src/source/values.js';

describe('scalar types', () => {
  it.each([
    [TypeOid.int2, '-32768', -32768],
    [TypeOid.int4, '2147483647', 2147483647],
    [TypeOid.oid, '4294967295', 4294967295],
    [TypeOid.int8, '9223372036854775807', 9223372036854775807n],
    [TypeOid.int8, '-9223372036854775808', -9223372036854775808n],
    [TypeOid.numeric, '12345678901234567890.000000000000000001', '12345678901234567890.000000000000000001'],
    [TypeOid.numeric, '0.10', '0.10'],
    [TypeOid.numeric, 'NaN', 'NaN'],
    [TypeOid.numeric, 'Infinity', 'Infinity'],
    [TypeOid.float8, '1.5', 1.5],
    [TypeOid.float8, '-Infinity', -Infinity],
    [TypeOid.float4, 'Infinity', Infinity],
    [TypeOid.float8, '1e+308', 1e308],
    [TypeOid.float8, '-0', -0],
    [TypeOid.bool, 't', true],
    [TypeOid.bool, 'f', false],
    [TypeOid.text, 'héllo "x"', 'héllo "x"'],
    [TypeOid.varchar, '', ''],
    [TypeOid.bpchar, 'ab  ', 'ab  '],
    [TypeOid.name, 'postgres', 'postgres'],
    [TypeOid.uuid, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'],
    [TypeOid.time, '10:00:00.5', '10:00:00.5'],
    [TypeOid.interval, '1 day 02:00:00', '1 day 02:00:00'],
    [TypeOid.money, '$1.00', '$1.00'],
    [99999, 'paid', 'paid'],
  ])('OID %i %j', (oid, text, expected) => {
    expect(decodeTextValue(oid, text)).toStrictEqual(expected);
  });

  it('float NaN', () => {
    expect(decodeTextValue(TypeOid.float8, 'NaN')).toBeNaN();
    expect(decodeTextValue(TypeOid.float4, 'NaN')).toBeNaN();
  });

  it('json and jsonb are parsed', () => {
    expect(decodeTextValue(TypeOid.jsonb, '{"a": [1, "x", null, {"b": true}]}')).toEqual({ a: [1, 'x', null, { b: true }] });
    expect(decodeTextValue(TypeOid.json, '"s"')).toBe('s');
    expect(decodeTextValue(TypeOid.json, 'null')).toBeNull();
  });

  it('SQL NULL stays null', () => {
    expect(decodeTextValue(TypeOid.int4, null)).toBeNull();
  });
});

describe('bytea', () => {
  it('hex format', () => {
    expect(decodeBytea('\\x')).toEqual(Buffer.alloc(0));
    expect(decodeBytea('\\xdeadbeef00')).toEqual(Buffer.from([0xde, 0xad, 0xbe, 0xef, 0]));
  });
  it('escape format', () => {
    expect(decodeBytea('ab\\\\c\\000\\377')).toEqual(Buffer.from([0x61, 0x62, 0x5c, 0x63, 0, 255]));
  });
});

describe('date and time', () => {
  it('date passes ISO through and keeps infinity/BC as text', () => {
    expect(decodeDate('2024-02-29')).toBe('2024-02-29');
    expect(decodeDate('infinity')).toBe('infinity');
    expect(decodeDate('-infinity')).toBe('-infinity');
    expect(decodeDate('0044-03-15 BC')).toBe('0044-03-15 BC');
    expect(() => decodeDate('02/29/2024')).toThrow(ValueDecodeError);
  });

  it('timestamp always has six fractional digits', () => {
    expect(decodeTimestamp('2024-01-02 03:04:05')).toBe('2024-01-02T03:04:05.000000');
    expect(decodeTimestamp('2024-01-02 03:04:05.1')).toBe('2024-01-02T03:04:05.100000');
    expect(decodeTimestamp('2024-01-02 03:04:05.123456')).toBe('2024-01-02T03:04:05.123456');
    expect(decodeTimestamp('infinity')).toBe('infinity');
    expect(decodeTimestamp('2000-01-01 00:00:00 BC')).toBe('2000-01-01 00:00:00 BC');
    expect(() => decodeTimestamp('Tue Jan 02 03:04:05 2024')).toThrow(/DateStyle/);
  });

  it.each([
    ['2024-01-02 03:04:05.123456+00', '2024-01-02T03:04:05.123456Z'],
    ['2024-01-02 03:04:05.123456+01', '2024-01-02T02:04:05.123456Z'],
    ['2024-01-02 03:04:05+05:30', '2024-01-01T21:34:05.000000Z'],
    ['2024-01-01 23:30:00.5-01', '2024-01-02T00:30:00.500000Z'],
    ['2024-02-28 23:00:00.000001-02', '2024-02-29T01:00:00.000001Z'],
    ['2023-02-28 23:00:00.000001-02', '2023-03-01T01:00:00.000001Z'],
    ['2024-12-31 23:59:59.999999-12', '2025-01-01T11:59:59.999999Z'],
    ['2000-03-01 00:00:00+14', '2000-02-29T10:00:00.000000Z'],
    // Historical local mean time offsets carry seconds (Europe/Amsterdam before 1937: +00:19:32).
    ['1900-01-01 00:00:00+00:19:32', '1899-12-31T23:40:28.000000Z'],
    ['0099-06-01 12:00:00+01', '0099-06-01T11:00:00.000000Z'],
    ['12345-01-01 00:00:00-01', '12345-01-01T01:00:00.000000Z'],
  ])('timestamptz %s → %s', (text, expected) => {
    expect(decodeTimestamptz(text)).toBe(expected);
  });

  it('timestamptz matches Date for whole milliseconds across offsets', () => {
    for (const [text, offset] of [['2021-03-28 01:59:59.999+01', '+01:00'], ['1969-12-31 23:59:59.001-08', '-08:00']] as const) {
      const iso = decodeTimestamptz(text);
      const local = text.slice(0, 23).replace(' ', 'T') + offset;
      expect(iso.slice(0, 23)).toBe(new Date(local).toISOString().slice(0, 23));
    }
  });

  it('timestamptz per-minute cache agrees with the uncached conversion', () => {
    const values: string[] = [];
    for (const minute of ['2024-01-02 03:04', '2024-01-02 03:05', '0001-01-01 00:30', '2024-02-29 23:59']) {
      for (const offset of ['+00', '+01', '-02', '+05:30', '-09:30', '+00:19:32']) {
        for (const sec of ['00', '07', '59.5', '01.123456', '02.000001', '03.12']) values.push(`${minute}:${sec}${offset}`);
      }
      values.push(`${minute}:00+01 BC`, `${minute}:00.123456+01 BC`);
    }
    // Interleave so that consecutive values share (or not) the minute and offset.
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < values.length; i++) {
        const v = values[(i * (round * 2 + 1)) % values.length]!;
        expect(decodeTimestamptz(v), v).toBe(decodeTimestamptzSlow(v));
      }
    }
  });

  it('timestamptz in the cached minute with seconds that are not digits is refused, as the uncached conversion refuses it', () => {
    expect(decodeTimestamptz('2024-01-02 03:04:05.5+01')).toBe('2024-01-02T02:04:05.500000Z');
    for (const bad of ['2024-01-02 03:04:5x+01', '2024-01-02 03:04:05.1x+01', '2024-01-02 03:04:０5+01']) {
      expect(() => decodeTimestamptzSlow(bad), bad).toThrow(/not in ISO format/);
      expect(() => decodeTimestamptz(bad), bad).toThrow(/not in ISO format/);
    }
  });

  it('timestamptz keeps infinity and BC as text', () => {
    expect(decodeTimestamptz('infinity')).toBe('infinity');
    expect(decodeTimestamptz('-infinity')).toBe('-infinity');
    expect(decodeTimestamptz('0001-01-01 00:00:00+01 BC')).toBe('0001-01-01 00:00:00+01 BC');
    expect(decodeTimestamptz('0001-01-01 00:30:00+01')).toBe('0001-01-01 00:30:00+01');
  });
});

describe('arrays', () => {
  it('int, bigint and numeric arrays', () => {
    expect(decodeTextValue(1007, '{1,2,3}')).toEqual([1, 2, 3]);
    expect(decodeTextValue(1016, '{9007199254740993,NULL}')).toEqual([9007199254740993n, null]);
    expect(decodeTextValue(1231, '{1.10,NaN}')).toEqual(['1.10', 'NaN']);
    expect(decodeTextValue(1007, '{}')).toEqual([]);
  });

  it('quoting, escapes, NULL vs "NULL", whitespace', () => {
    expect(parseArrayLiteral('{a,"b c","d\\"e","f\\\\g",NULL,"NULL",null, h ,""}')).toEqual(
      ['a', 'b c', 'd"e', 'f\\g', null, 'NULL', null, 'h', ''],
    );
    expect(parseArrayLiteral('{"{x}","a,b"}')).toEqual(['{x}', 'a,b']);
    expect(parseArrayLiteral('{a\\,b}')).toEqual(['a,b']);
  });

  it('nested dimensions and explicit bounds', () => {
    expect(decodeTextValue(1007, '{{1,2},{3,NULL}}')).toEqual([[1, 2], [3, null]]);
    expect(decodeTextValue(1009, '{{{"a"}},{{"b"}}}')).toEqual([[['a']], [['b']]]);
    expect(decodeTextValue(1007, '[0:2]={1,2,3}')).toEqual([1, 2, 3]);
    expect(decodeTextValue(1007, '[1:1][1:2]={{7,8}}')).toEqual([[7, 8]]);
  });

  it('element decoders apply: bool, bytea, json, timestamptz, date', () => {
    expect(decodeTextValue(1000, '{t,f,NULL}')).toEqual([true, false, null]);
    expect(decodeTextValue(1001, '{"\\\\x0102",NULL}')).toEqual([Buffer.from([1, 2]), null]);
    expect(decodeTextValue(3807, '{"{\\"a\\": 1}","[2]"}')).toEqual([{ a: 1 }, [2]]);
    expect(decodeTextValue(1185, '{"2024-01-02 03:04:05.123456+01","2024-01-02 00:00:00-00:30"}'))
      .toEqual(['2024-01-02T02:04:05.123456Z', '2024-01-02T00:30:00.000000Z']);
    expect(decodeTextValue(1182, '{2024-01-01,infinity}')).toEqual(['2024-01-01', 'infinity']);
    expect(decodeTextValue(1022, '{1.5,NaN,-Infinity}')).toEqual([1.5, NaN, -Infinity]);
  });

  it('malformed literals fail loudly', () => {
    expect(() => parseArrayLiteral('{1,2')).toThrow(ValueDecodeError);
    expect(() => parseArrayLiteral('{"a}')).toThrow(ValueDecodeError);
    expect(() => parseArrayLiteral('{1,,2}')).toThrow(ValueDecodeError);
    expect(() => parseArrayLiteral('{1}x')).toThrow(ValueDecodeError);
  });
});

describe('decoderForType', () => {
  it('returns the same function for a type (built once per relation version)', () => {
    expect(decoderForType(23)).toBe(decoderForType(23));
  });

  it('unknown OIDs resolve through the Type message name (domains arrive named by their base type)', () => {
    expect(decoderForType(70001, 'numeric')('1.50')).toBe('1.50');
    expect(decoderForType(70002, 'int8')('5')).toBe(5n);
    expect(decoderForType(70003, '_int4')('{1,2}')).toEqual([1, 2]);
    expect(decoderForType(70004, '_invoice_status')('{draft,paid}')).toEqual(['draft', 'paid']);
    expect(decoderForType(70005, 'invoice_status')('draft')).toBe('draft');
    expect(decoderForType(70006)('(1,2)')).toBe('(1,2)');
  });
});
