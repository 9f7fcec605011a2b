import type { SourceUnit } from '../source/types.js';
import type { AnyMapper } from './types.js';
import { MapperPurityError } from './mapper-error.js';
import { createTransactionView } from './transaction-view.js';
import { firstDifference, valueAt } from './values.js';

/** A deep copy of `value` (Buffers and Dates copied, symbols kept) — never shares a node with it. */
export function deepCopy<T>(value: T): T {
  if (value === null || typeof value !== 'object') return value;
  if (Buffer.isBuffer(value)) return Buffer.from(value) as T;
  if (value instanceof Date) return new Date(value.getTime()) as T;
  if (Array.isArray(value)) return value.map(deepCopy) as T;
  const out: Record<string | symbol, unknown> = {};
  for (const key of Reflect.ownKeys(value)) out[key] = deepCopy((value as Record<string | symbol, unknown>)[key]);
  return out as T;
}

/** Freezes `value` and everything reachable from it (Buffers excepted: typed arrays cannot be frozen). */
export function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Buffer.isBuffer(value) || ArrayBuffer.isView(value) || Object.isFrozen(value)) return value;
  for (const key of Reflect.ownKeys(value)) deepFreeze((value as Record<string | symbol, unknown>)[key]);
  return Object.freeze(value);
}

function show(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'symbol') return value.toString();
  try {
    const text = JSON.stringify(value);
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  } catch {
    return String(value);
  }
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

function run(mapper: AnyMapper, unit: SourceUnit): Outcome {
  const { tx } = createTransactionView(deepFreeze(deepCopy(unit)), mapper.tables);
  try {
    const output: unknown = mapper.map(tx);
    // A generator's events are made while it is iterated: compare what it yields.
    const value = !Array.isArray(output) && output !== null && typeof output === 'object' && Symbol.iterator in output ? [...(output as Iterable<unknown>)] : output;
    return { ok: true, value };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * Runs `mapper` twice on `unit` — each time on a separately built view of a separate,
 * deep-frozen copy — and throws a {@link MapperPurityError} naming the first path at which
 * the outputs differ (a clock, a random number, state kept between calls). A mapper that
 * mutates its input fails on the frozen copy. Returns the mapper's output when both runs agree;
 * rethrows the mapper's own error when both runs throw.
 */
export function checkMapperPurity(mapper: AnyMapper, unit: SourceUnit): unknown {
  const first = run(mapper, unit);
  const second = run(mapper, unit);
  if (!first.ok && !second.ok) throw first.error;
  if (!first.ok || !second.ok) {
    const describe = (o: Outcome) => (o.ok ? 'returned events' : `threw ${o.error instanceof Error ? o.error.message : String(o.error)}`);
    throw new MapperPurityError(mapper.name, '(outcome)', describe(first), describe(second));
  }
  const path = firstDifference(first.value, second.value);
  if (path !== null) throw new MapperPurityError(mapper.name, path, show(valueAt(first.value, path)), show(valueAt(second.value, path)));
  return first.value;
}
