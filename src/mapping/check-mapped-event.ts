/**
 * The check of a mapper's output, run on every event of every path (`mapUnit` for transactions in
 * memory and snapshot records, both runs of `planLargeUnit` for large ones): an event either is
 * what the sink can append as JSON, or the mapper fails with a `MapperOutputError` naming the
 * mapper, the event (index, type, stream), the field path and the fix — and then follows the
 * mapper's `onError` like any exception of `map` (halt, or a `MapperFailed` record).
 *
 * Two kinds of pitfalls are caught:
 *  - a value JSON cannot carry, or carries as something else (`JSON.stringify` drops functions,
 *    writes an `undefined` array element and NaN as `null`, Dates as strings, throws on a bigint):
 *    one walk over `data`, no serialization, the path built only when something is wrong. A
 *    property set to `undefined` is a field left out, as in JSON — the usual way to omit an
 *    optional field; a required field left out is the contract's to catch;
 *  - a stream name (or explicit entity) with `undefined`, `null`, `NaN` or `[object Object]`
 *    interpolated into it — see {@link INTERPOLATED_TOKEN} for the rule.
 */
import { MapperOutputError } from './mapper-error.js';
import type { MappedEvent, MapperOutputErrorDetails } from './types.js';

/** Metadata prefixes a mapper may not use: `$` is KurrentDB's (`$correlationId`, `$schema.*`), `receipt.` the sink's. */
export const RESERVED_METADATA_PREFIXES: readonly string[] = ['$', 'receipt.'];

/** Metadata keys a mapper may not use: `receipt` is the sink's (src/sink/receipt.ts). */
export const RESERVED_METADATA_KEYS: readonly string[] = ['receipt'];

/**
 * What string interpolation writes for a value that is not there: `${undefined}`, `${null}`,
 * `${NaN}` (e.g. `Number(undefined)`), `${{}}`. The rule: the token, with exactly that casing, not
 * touching a letter or digit on either side — so `order-undefined`, `order-null`, `line-7-NaN`,
 * `order-null_3` and `order-[object Object]` are refused, while `order-nullable-x`,
 * `user-annulled`, `tag-NULL`, `bread-naan` and `customer-NaNa` are not. JavaScript never writes
 * `NULL` or `nan` when interpolating, so those stay legitimate ids. The price: an id that really is
 * the lone word `null`, `undefined` or `NaN` between separators cannot be a stream name as is.
 */
export const INTERPOLATED_TOKEN = /(?<![\p{L}\p{N}])(?:undefined|null|NaN)(?![\p{L}\p{N}])|\[object [A-Za-z]*\]/u;

const HINT_KEY =
  'on a delete change.after is null and change.before holds only the declared before-columns (null with before: \'none\'): read the key from change.key (its columns must be in columns)';

/** A mapper's event, checked, with its entity read from the stream name or given explicitly. */
export interface CheckedEvent {
  readonly event: MappedEvent;
  readonly entity: { readonly type: string; readonly id: string };
}

/** A problem found in a value: the path to it (innermost segment first), what is wrong, the fix. */
interface Found {
  readonly segments: (string | number)[];
  readonly problem: string;
  readonly hint: string;
}

function found(problem: string, hint: string): Found {
  return { segments: [], problem, hint };
}

function nonJsonPrimitive(value: unknown, inArray: boolean): Found | null {
  switch (typeof value) {
    case 'number':
      return found(`is ${value}; JSON has no such number (it would be written as null)`, 'use null or a string; NaN usually comes from Number() or arithmetic on a missing value');
    case 'bigint':
      return found('is a bigint; JSON has no bigint', 'convert it with String(value) (int8 and numeric columns go into contracts as strings)');
    case 'symbol':
      return found('is a symbol (an unchanged TOAST value?)', 'check isUnchangedToast(value) before using the column, and leave the field out or read the value elsewhere');
    case 'undefined':
      return inArray
        ? found('is undefined (an array element; JSON would write null)', `use null, or filter the element out; if it was read from a row, ${HINT_KEY}`)
        : found('is undefined (JSON would drop the field)', `use null, or leave the key out; if it was read from a row, ${HINT_KEY}`);
    case 'function':
      return found('is a function; JSON drops it', 'put the value it computes, not the function');
    default:
      return null;
  }
}

function nonPlainObject(value: object): Found {
  if (value instanceof Date) return found('is a Date', 'convert it with value.toISOString() (or use the column as the source sent it: a string)');
  if (ArrayBuffer.isView(value)) return found('is bytes (a Buffer or typed array)', "encode it as a string: value.toString('base64'), or '\\\\x' + value.toString('hex')");
  if (value instanceof Map) return found('is a Map; JSON writes it as {}', 'convert it with Object.fromEntries(value)');
  if (value instanceof Set) return found('is a Set; JSON writes it as {}', 'convert it with [...value]');
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return found(`is a ${typeof name === 'string' && name !== '' ? name : 'non-plain object'}`, 'events carry plain JSON: copy the fields you need into a plain object (strings for bytes and dates)');
}

/**
 * The first value under `value` that JSON cannot carry as it is, or null. `ancestors`: the
 * objects on the way down (a cycle would otherwise recurse forever).
 */
function findNonJson(value: object, ancestors: object[]): Found | null {
  if (ancestors.includes(value)) return found('refers back to an enclosing object (a cycle)', 'JSON cannot hold a cycle: copy the values you need');
  let bad: Found | null = null;
  ancestors.push(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      bad = findIn(value[i], true, ancestors);
      if (bad !== null) {
        bad.segments.push(i);
        break;
      }
    }
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      ancestors.pop();
      return nonPlainObject(value);
    }
    for (const key of Object.keys(value)) {
      const v = (value as Record<string, unknown>)[key];
      // A property set to undefined is refused too, though JSON would drop it: it is how a value
      // read from a missing column (a delete's before-image, a column not allowlisted) slips out
      // of an event unnoticed when the contract makes it optional. Leave the key out instead.
      bad = findIn(v, false, ancestors);
      if (bad !== null) {
        bad.segments.push(key);
        break;
      }
    }
  }
  ancestors.pop();
  return bad;
}

function findIn(v: unknown, inArray: boolean, ancestors: object[]): Found | null {
  const t = typeof v;
  if (t === 'string' || t === 'boolean' || v === null || (t === 'number' && Number.isFinite(v))) return null;
  return t === 'object' ? findNonJson(v as object, ancestors) : nonJsonPrimitive(v, inArray);
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function pathOf(root: string, segments: readonly (string | number)[]): string {
  let path = root;
  for (let i = segments.length - 1; i >= 0; i--) {
    const s = segments[i]!;
    path += typeof s === 'number' ? `[${s}]` : IDENTIFIER.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`;
  }
  return path;
}

/** The problem with `data` (a plain object by now), as a path and a fix, or null. */
export function findNonJsonData(data: object): { readonly path: string; readonly problem: string; readonly hint: string } | null {
  const bad = findNonJson(data, []);
  return bad === null ? null : { path: pathOf('data', bad.segments), problem: bad.problem, hint: bad.hint };
}

function outputError(mapper: string | null, index: number, e: Record<string, unknown>, path: string, problem: string, hint: string): MapperOutputError {
  const details: MapperOutputErrorDetails = {
    mapper,
    event: { index, type: typeof e.type === 'string' ? e.type : null, stream: typeof e.stream === 'string' ? e.stream : null },
    path,
    problem,
    hint,
  };
  return new MapperOutputError(details);
}

function interpolationProblem(value: string): string | null {
  const token = INTERPOLATED_TOKEN.exec(value)?.[0];
  return token === undefined ? null : `"${value}" holds "${token}": a value interpolated into it was ${token.startsWith('[object') ? 'an object' : token}`;
}

/** The entity of an event: explicit, or read from a `<entityType>-<entityId>` stream name. */
function entityOf(mapper: string | null, index: number, e: Record<string, unknown>, stream: string): { type: string; id: string } {
  if (e.entity !== undefined) {
    const ent = e.entity as Record<string, unknown> | null;
    if (!ent || typeof ent.type !== 'string' || typeof ent.id !== 'string' || ent.type === '' || ent.id === '') {
      throw outputError(mapper, index, e, 'entity', 'must be { type, id } with non-empty strings', "set entity: { type: 'invoice', id: String(row.id) }, or leave it out");
    }
    for (const field of ['type', 'id'] as const) {
      const problem = interpolationProblem(ent[field] as string);
      if (problem !== null) throw outputError(mapper, index, e, `entity.${field}`, problem, `read the value from a column that is set for this operation: ${HINT_KEY}`);
    }
    return { type: ent.type, id: ent.id };
  }
  const dash = stream.indexOf('-');
  if (dash <= 0 || dash === stream.length - 1) {
    throw outputError(mapper, index, e, 'stream', `"${stream}" is not of the form <entityType>-<entityId>`, 'name it so or set entity: { type, id }');
  }
  return { type: stream.slice(0, dash), id: stream.slice(dash + 1) };
}

function checkMetadata(mapper: string | null, index: number, e: Record<string, unknown>): void {
  const metadata = e.metadata;
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw outputError(mapper, index, e, 'metadata', 'must be an object', 'event metadata is flat strings: { tenant: String(row.tenant_id) }, or leave it out');
  }
  for (const k of Object.keys(metadata)) {
    const v = (metadata as Record<string, unknown>)[k];
    const path = `metadata[${JSON.stringify(k)}]`;
    if (typeof v !== 'string') {
      const what = findIn(v, false, [])?.problem ?? `is a ${v === null ? 'null' : typeof v}`;
      throw outputError(mapper, index, e, path, `must be a string (event metadata is flat strings); it ${what}`, 'convert it with String(value), or leave the key out');
    }
    if (RESERVED_METADATA_PREFIXES.some((p) => k.startsWith(p)) || RESERVED_METADATA_KEYS.includes(k)) {
      const reserved = [...RESERVED_METADATA_KEYS.map((key) => `"${key}"`), ...RESERVED_METADATA_PREFIXES.map((p) => `keys starting with "${p}"`)].join(', ');
      throw outputError(mapper, index, e, path, `${reserved} are reserved (KurrentDB's and the sink's)`, 'rename the key');
    }
  }
}

/**
 * One event of a mapper's output (`index`: its place among the mapper's events), checked; throws
 * a `MapperOutputError` naming `mapper`, the event, the offending field and the fix.
 */
export function checkMappedEvent(event: unknown, index: number, mapper: string | null = null): CheckedEvent {
  if (event === null || typeof event !== 'object') {
    throw outputError(mapper, index, {}, '(event)', `is ${event === null ? 'null' : typeof event}, not an event object`, 'return { stream, type, version, data } objects');
  }
  const e = event as Record<string, unknown>;
  const stream = e.stream;
  if (typeof stream !== 'string' || stream === '') throw outputError(mapper, index, e, 'stream', 'must be a non-empty string', "name the stream '<entityType>-<entityId>', e.g. `invoice-${row.id}`");
  const interpolated = interpolationProblem(stream);
  if (interpolated !== null) throw outputError(mapper, index, e, 'stream', interpolated, `read the id from a column that is set for this operation: ${HINT_KEY}`);
  if (typeof e.type !== 'string' || e.type === '') throw outputError(mapper, index, e, 'type', 'must be a non-empty string', "set type to the event type, e.g. 'InvoiceIssued'");
  if (typeof e.version !== 'number' || !Number.isSafeInteger(e.version) || e.version < 1) {
    throw outputError(mapper, index, e, 'version', `must be a positive integer, got ${String(e.version)}`, 'set version to the contract version (InvoiceIssued v2 → 2)');
  }
  const data = e.data;
  if (data === null || typeof data !== 'object' || Array.isArray(data)) throw outputError(mapper, index, e, 'data', 'must be an object', 'return data as a plain object of JSON values');
  const bad = findNonJsonData(data);
  if (bad !== null) throw outputError(mapper, index, e, bad.path, bad.problem, bad.hint);
  if (e.metadata !== undefined) checkMetadata(mapper, index, e);
  return { event: e as unknown as MappedEvent, entity: entityOf(mapper, index, e, stream) };
}

/** A mapper's output as an iterable of events (an array, a generator, any iterable but a string). */
export function mapperOutput(output: unknown, mapper: string | null = null): Iterable<unknown> {
  if (Array.isArray(output)) return output;
  if (output !== null && typeof output === 'object' && typeof (output as Iterable<unknown>)[Symbol.iterator] === 'function') return output as Iterable<unknown>;
  throw new MapperOutputError({
    mapper,
    event: null,
    path: '(output)',
    problem: `map must return an array or an iterable of events, got ${output === null ? 'null' : typeof output}`,
    hint: 'return [] for none',
  });
}

/** Validates a mapper's whole output; throws `MapperOutputError` naming the offending event and field. */
export function checkMappedEvents(output: unknown, mapper: string | null = null): CheckedEvent[] {
  const events = mapperOutput(output, mapper);
  const checked: CheckedEvent[] = [];
  for (const event of events) checked.push(checkMappedEvent(event, checked.length, mapper));
  return checked;
}
