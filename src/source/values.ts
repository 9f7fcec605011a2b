/**
 * Text-format column values (what pgoutput sends without `binary 'true'`) → typed JS values,
 * per type OID, as documented on {@link Row} in `types.ts`.
 *
 * Assumes the walsender session's output settings are PostgreSQL's defaults for a client that
 * parses text: `DateStyle = ISO`, `IntervalStyle = postgres`, `bytea_output = hex` (escape is
 * also understood). Any `TimeZone` works: timestamptz values are normalised to UTC here.
 * Date/time text that is not ISO fails loudly ({@link ValueDecodeError}) rather than being
 * passed on in a shape downstream does not expect.
 *
 * Build decoders once per relation version ({@link decoderForType}); the returned functions are
 * the hot path.
 */
import { EventAssemblerError } from '../errors.js';

/** Decodes one non-NULL text value. */
export type ValueDecoder = (text: string) => unknown;

export class ValueDecodeError extends EventAssemblerError {
  constructor(message: string, details: Readonly<Record<string, unknown>>) {
    super('VALUE_DECODE_FAILED', message, details);
  }
}

/** Built-in type OIDs (pg_type.dat) the decoder knows. */
export const TypeOid = {
  bool: 16, bytea: 17, char: 18, name: 19, int8: 20, int2: 21, int4: 23, text: 25, oid: 26,
  json: 114, xml: 142, float4: 700, float8: 701, money: 790, bpchar: 1042, varchar: 1043,
  date: 1082, time: 1083, timestamp: 1114, timestamptz: 1184, interval: 1186, timetz: 1266,
  numeric: 1700, uuid: 2950, jsonb: 3802,
} as const;

const identity: ValueDecoder = (s) => s;
const toInt: ValueDecoder = (s) => Number(s);
const toBigInt: ValueDecoder = (s) => BigInt(s);
const toFloat: ValueDecoder = (s) => Number(s); // accepts NaN, Infinity, -Infinity as PostgreSQL prints them
const toBool: ValueDecoder = (s) => s === 't';
const toJson: ValueDecoder = (s) => JSON.parse(s);

/** bytea in hex (`\x0a0b`) or escape (`a\\b\001`) output format → Buffer. */
export function decodeBytea(text: string): Buffer {
  if (text.length >= 2 && text.charCodeAt(0) === 0x5c && text.charCodeAt(1) === 0x78) {
    return Buffer.from(text.slice(2), 'hex');
  }
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x5c) { out.push(c); continue; }
    if (text.charCodeAt(i + 1) === 0x5c) { out.push(0x5c); i++; continue; }
    out.push(parseInt(text.slice(i + 1, i + 4), 8));
    i += 3;
  }
  return Buffer.from(out);
}

/** `YYYY-MM-DD` passes through; `infinity`, `-infinity` and `… BC` stay PostgreSQL text. */
export function decodeDate(text: string): string {
  if (text.length === 10 && text.charCodeAt(4) === 0x2d && text.charCodeAt(7) === 0x2d) return text;
  if (text === 'infinity' || text === '-infinity' || text.endsWith(' BC') || /^\d{5,}-\d\d-\d\d$/.test(text)) return text;
  throw new ValueDecodeError(`date "${text}" is not in ISO format (DateStyle must be ISO)`, { type: 'date', text });
}

const TIMESTAMP_RE = /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?$/;
const TIMESTAMPTZ_RE = /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?$/;
const ZEROS = '000000';

function fraction6(f: string | undefined): string {
  return f === undefined ? ZEROS : f.length === 6 ? f : f + ZEROS.slice(f.length);
}

/** `2024-01-02 03:04:05.12` → `2024-01-02T03:04:05.120000` (always six fractional digits). */
export function decodeTimestamp(text: string): string {
  const m = TIMESTAMP_RE.exec(text);
  if (m === null) {
    if (text === 'infinity' || text === '-infinity' || text.endsWith(' BC')) return text;
    throw new ValueDecodeError(`timestamp "${text}" is not in ISO format (DateStyle must be ISO)`, { type: 'timestamp', text });
  }
  return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${fraction6(m[7])}`;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
function daysFromCivil(y: number, m: number, d: number): number {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function civilFromDays(z: number): [number, number, number] {
  z += 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp + (mp < 10 ? 3 : -9);
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}

/**
 * `2024-01-02 03:04:05.123456+01` (session TimeZone, offsets `+HH`, `+HH:MM`, `+HH:MM:SS`) →
 * `2024-01-02T02:04:05.123456Z`. Integer arithmetic on whole seconds; the fraction is carried
 * as text, so no microsecond is lost. `infinity`, `-infinity` and `… BC` stay PostgreSQL text.
 */
export function decodeTimestamptz(text: string): string {
  // Fast path: values of one transaction usually share the minute and the offset; reuse the
  // UTC `YYYY-MM-DDTHH:MM` of the previous value when `YYYY-MM-DD HH:MM` and the offset match.
  const n = text.length;
  if (n >= 19 && text.charCodeAt(16) === 0x3a && text.charCodeAt(4) === 0x2d) {
    const offsetAt = text.charCodeAt(n - 3) === 0x2b || text.charCodeAt(n - 3) === 0x2d ? n - 3
      : text.charCodeAt(n - 6) === 0x2b || text.charCodeAt(n - 6) === 0x2d ? n - 6 : -1;
    if (offsetAt > 0 && text.startsWith(lastTzMinute, 0) && text.endsWith(lastTzOffset) && lastTzMinute.length === 16 && offsetAt === n - lastTzOffset.length) {
      const sameMinute = utcInSameMinute(text, offsetAt);
      if (sameMinute !== null) return sameMinute;
    }
  }
  const result = decodeTimestamptzSlow(text);
  if (result.length >= 27 && result.charCodeAt(result.length - 1) === 0x5a /* Z */) {
    const m = TZ_OFFSET_RE.exec(text);
    if (m !== null) {
      lastTzMinute = text.slice(0, 16);
      lastTzOffset = m[0];
      utcText.write(result, 0, 16, 'latin1'); // the UTC minute, for the next value in this one
    }
  }
  return result;
}

let lastTzMinute = '';
let lastTzOffset = '';
const TZ_OFFSET_RE = /[+-]\d\d(?::\d\d)?$/;

/**
 * `YYYY-MM-DDTHH:MM:SS.ffffffZ` laid out byte by byte: the UTC minute of the last value that went
 * the slow way written with it, the separators once, the seconds and fraction per value.
 */
const utcText = Buffer.from('0000-00-00T00:00:00.000000Z', 'latin1');

/**
 * The UTC text of a value in the minute of the previous one: that minute (in `utcText`) and the value's
 * `SS[.f…]` (at 17 up to `offsetAt`), laid out in one buffer and read as one string — a template of
 * slices made ≈ 280 bytes of garbage per value (an allocation profile of a snapshot,
 * bench/results/2026-12-07-save-ahead.md). `null` when the seconds are not `SS` or `SS.` with one to
 * six digits (the slow path decides).
 */
function utcInSameMinute(text: string, offsetAt: number): string | null {
  const length = offsetAt - 17;
  if (length !== 2 && !(length >= 4 && length <= 9 && text.charCodeAt(19) === 0x2e)) return null;
  for (let i = 0; i < 2; i++) {
    const c = text.charCodeAt(17 + i);
    if (c < 0x30 || c > 0x39) return null;
    utcText[17 + i] = c;
  }
  for (let i = 0; i < 6; i++) {
    const at = 20 + i;
    const c = at < offsetAt ? text.charCodeAt(at) : 0x30;
    if (c < 0x30 || c > 0x39) return null;
    utcText[at] = c;
  }
  return utcText.toString('latin1', 0, 27);
}

/** {@link decodeTimestamptz} without the per-minute cache. */
export function decodeTimestamptzSlow(text: string): string {
  const m = TIMESTAMPTZ_RE.exec(text);
  if (m === null) {
    if (text === 'infinity' || text === '-infinity' || text.endsWith(' BC')) return text;
    throw new ValueDecodeError(`timestamptz "${text}" is not in ISO format (DateStyle must be ISO)`, { type: 'timestamptz', text });
  }
  const frac = fraction6(m[7]);
  const offH = Number(m[9]);
  const offM = m[10] === undefined ? 0 : Number(m[10]);
  const offS = m[11] === undefined ? 0 : Number(m[11]);
  if (offH === 0 && offM === 0 && offS === 0) {
    return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${frac}Z`;
  }
  const offset = (m[8] === '-' ? -1 : 1) * (offH * 3600 + offM * 60 + offS);
  const seconds = daysFromCivil(Number(m[1]), Number(m[2]), Number(m[3])) * 86400
    + Number(m[4]) * 3600 + Number(m[5]) * 60 + Number(m[6]) - offset;
  const days = Math.floor(seconds / 86400);
  let rest = seconds - days * 86400;
  const [y, mo, d] = civilFromDays(days);
  if (y < 1) return text; // would cross into BC: keep PostgreSQL's text
  const hh = Math.floor(rest / 3600);
  rest -= hh * 3600;
  const mi = Math.floor(rest / 60);
  const ss = rest - mi * 60;
  const year = y < 1000 ? String(y).padStart(4, '0') : String(y);
  return `${year}-${pad2(mo)}-${pad2(d)}T${pad2(hh)}:${pad2(mi)}:${pad2(ss)}.${frac}Z`;
}

/**
 * Parses a PostgreSQL array literal (`{1,2,NULL}`, `{{"a b","c\"d"},{e,f}}`, `[0:1]={x,y}`)
 * into nested JS arrays, decoding each non-NULL element with `element`. Delimiter `,` (every
 * built-in type except `box`).
 */
export function parseArrayLiteral(text: string, element: ValueDecoder = identity): unknown[] {
  let i = 0;
  const n = text.length;
  if (text.charCodeAt(0) === 0x5b /* [ */) {
    const eq = text.indexOf('=');
    if (eq < 0) throw new ValueDecodeError(`malformed array literal "${text}"`, { text });
    i = eq + 1;
  }
  const fail = (): never => {
    throw new ValueDecodeError(`malformed array literal at offset ${i}: "${text.length > 200 ? `${text.slice(0, 200)}…` : text}"`, { offset: i });
  };
  const skipSpace = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };

  const parseLevel = (): unknown[] => {
    if (text.charCodeAt(i) !== 0x7b /* { */) fail();
    i++;
    const out: unknown[] = [];
    skipSpace();
    if (text.charCodeAt(i) === 0x7d /* } */) { i++; return out; }
    for (;;) {
      skipSpace();
      const c = text.charCodeAt(i);
      if (c === 0x7b) {
        out.push(parseLevel());
      } else if (c === 0x22 /* " */) {
        i++;
        let s = '';
        let start = i;
        for (;;) {
          if (i >= n) fail();
          const q = text.charCodeAt(i);
          if (q === 0x5c /* \ */) { s += text.slice(start, i) + text.charAt(i + 1); i += 2; start = i; continue; }
          if (q === 0x22) { s += text.slice(start, i); i++; break; }
          i++;
        }
        out.push(element(s));
      } else {
        let s = '';
        let start = i;
        let hadEscape = false;
        for (;;) {
          if (i >= n) fail();
          const q = text.charCodeAt(i);
          if (q === 0x5c) { s += text.slice(start, i) + text.charAt(i + 1); i += 2; start = i; hadEscape = true; continue; }
          if (q === 0x2c /* , */ || q === 0x7d) break;
          i++;
        }
        s = (s + text.slice(start, i)).trimEnd();
        if (s.length === 0) fail();
        out.push(!hadEscape && s.length === 4 && s.toUpperCase() === 'NULL' ? null : element(s));
      }
      skipSpace();
      const d = text.charCodeAt(i);
      i++;
      if (d === 0x2c) continue;
      if (d === 0x7d) return out;
      i--;
      fail();
    }
  };
  const result = parseLevel();
  skipSpace();
  if (i !== n) fail();
  return result;
}

const SCALAR_DECODERS = new Map<number, ValueDecoder>([
  [TypeOid.bool, toBool],
  [TypeOid.bytea, decodeBytea],
  [TypeOid.int2, toInt], [TypeOid.int4, toInt], [TypeOid.oid, toInt],
  [TypeOid.int8, toBigInt],
  [TypeOid.float4, toFloat], [TypeOid.float8, toFloat],
  [TypeOid.numeric, identity],
  [TypeOid.json, toJson], [TypeOid.jsonb, toJson],
  [TypeOid.date, decodeDate],
  [TypeOid.timestamp, decodeTimestamp],
  [TypeOid.timestamptz, decodeTimestamptz],
]);

/** Array type OID → element type OID (pg_type.dat `typarray`), for the types above and common text types. */
const ARRAY_ELEMENTS = new Map<number, number>([
  [1000, TypeOid.bool], [1001, TypeOid.bytea], [1002, TypeOid.char], [1003, TypeOid.name],
  [1005, TypeOid.int2], [1007, TypeOid.int4], [1016, TypeOid.int8], [1028, TypeOid.oid],
  [1009, TypeOid.text], [1014, TypeOid.bpchar], [1015, TypeOid.varchar], [2951, TypeOid.uuid],
  [199, TypeOid.json], [3807, TypeOid.jsonb], [143, TypeOid.xml],
  [1021, TypeOid.float4], [1022, TypeOid.float8], [1231, TypeOid.numeric], [791, TypeOid.money],
  [1182, TypeOid.date], [1183, TypeOid.time], [1115, TypeOid.timestamp], [1185, TypeOid.timestamptz],
  [1187, TypeOid.interval], [1270, TypeOid.timetz],
  [1041, 869 /* inet */], [651, 650 /* cidr */], [1040, 829 /* macaddr */],
]);

const TYPE_OIDS_BY_NAME = new Map<string, number>(Object.entries(TypeOid));
const ARRAY_OIDS_BY_ELEMENT_NAME = new Map<string, number>();
for (const [arrayOid, elementOid] of ARRAY_ELEMENTS) {
  for (const [name, oid] of TYPE_OIDS_BY_NAME) if (oid === elementOid) ARRAY_OIDS_BY_ELEMENT_NAME.set(`_${name}`, arrayOid);
}

function arrayDecoder(element: ValueDecoder): ValueDecoder {
  return (s) => parseArrayLiteral(s, element);
}

const ARRAY_DECODERS = new Map<number, ValueDecoder>();
for (const [arrayOid, elementOid] of ARRAY_ELEMENTS) {
  ARRAY_DECODERS.set(arrayOid, arrayDecoder(SCALAR_DECODERS.get(elementOid) ?? identity));
}
const TEXT_ARRAY = ARRAY_DECODERS.get(1009)!;

/**
 * The decoder for a column type. Unknown OIDs (enums, domains, composites, ranges, …) are
 * resolved through `typeName` when pgoutput sent a Type message: PostgreSQL names a domain by
 * its *base* type there (proto.c `logicalrep_write_typ`), so a domain over `numeric` decodes as
 * numeric and one over `int4[]` (`_int4`) as an int array; any other `_name` is taken as an
 * array of text (enum arrays). Everything else stays PostgreSQL's text.
 * Limit: a user type whose own name starts with `_` and is not an array would be parsed as one.
 */
export function decoderForType(typeOid: number, typeName?: string): ValueDecoder {
  const known = SCALAR_DECODERS.get(typeOid) ?? ARRAY_DECODERS.get(typeOid);
  if (known !== undefined) return known;
  if (ARRAY_ELEMENTS.has(typeOid)) return TEXT_ARRAY;
  if (typeName !== undefined && typeName.length > 0) {
    const byName = TYPE_OIDS_BY_NAME.get(typeName);
    if (byName !== undefined) return SCALAR_DECODERS.get(byName) ?? identity;
    const arrayByName = ARRAY_OIDS_BY_ELEMENT_NAME.get(typeName);
    if (arrayByName !== undefined) return ARRAY_DECODERS.get(arrayByName)!;
    if (typeName.charCodeAt(0) === 0x5f /* _ */) return TEXT_ARRAY;
  }
  return identity;
}

/** Built-in type name for an OID, when the decoder knows it (e.g. 23 → `int4`, 1007 → `_int4`). */
export function builtinTypeName(typeOid: number): string | undefined {
  for (const [name, oid] of TYPE_OIDS_BY_NAME) if (oid === typeOid) return name;
  for (const [name, oid] of ARRAY_OIDS_BY_ELEMENT_NAME) if (oid === typeOid) return name;
  return undefined;
}

/** Convenience (not for the hot path): decode one value of a type. `null` stays `null`. */
export function decodeTextValue(typeOid: number, text: string | null, typeName?: string): unknown {
  return text === null ? null : decoderForType(typeOid, typeName)(text);
}
