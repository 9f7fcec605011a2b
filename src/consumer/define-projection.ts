// defineProjection: checks a projection definition once, at start-up, and fills in the defaults.
import { ProjectionConfigError } from './errors.js';
import type { EventMap, Projection, ProjectionDefinition, RetryOptions } from './types.js';

export const DEFAULT_BATCH_SIZE = 100;
export const DEFAULT_RETRY: RetryOptions = { attempts: 3, initialDelayMs: 100, maxDelayMs: 5_000 };
const NAME = /^[a-z0-9_-]{1,63}$/;

function fail(name: string, field: string, problem: string): never {
  throw new ProjectionConfigError('PROJECTION_INVALID_DEFINITION', name, field, problem);
}

function stringList(name: string, field: string, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v === '')) fail(name, field, 'must be a list of non-empty strings');
  return [...new Set(value as string[])];
}

function positiveInteger(name: string, field: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) fail(name, field, `must be an integer ≥ ${min} (found ${String(value)})`);
  return value;
}

function retryOf(name: string, retry: Partial<RetryOptions> | undefined): RetryOptions {
  const attempts = positiveInteger(name, 'retry.attempts', retry?.attempts ?? DEFAULT_RETRY.attempts, 1);
  const initialDelayMs = positiveInteger(name, 'retry.initialDelayMs', retry?.initialDelayMs ?? DEFAULT_RETRY.initialDelayMs, 0);
  const maxDelayMs = positiveInteger(name, 'retry.maxDelayMs', retry?.maxDelayMs ?? DEFAULT_RETRY.maxDelayMs, initialDelayMs);
  return { attempts, initialDelayMs, maxDelayMs };
}

/**
 * Declares a projection: which events (`from`), what each does (`handlers`, keyed by event type,
 * typed by `E` — e.g. `LatestEventContracts` from `contracts gen`), which types delete their
 * entity. Throws `ProjectionConfigError` naming the field when something is wrong.
 */
export function defineProjection<E extends EventMap = EventMap>(definition: ProjectionDefinition<E>): Projection<E> {
  const name = typeof definition?.name === 'string' ? definition.name : '';
  if (!NAME.test(name)) fail(name || '(unnamed)', 'name', 'must be 1–63 characters of a-z, 0-9, _ and -');
  const categories = stringList(name, 'from.categories', definition.from?.categories);
  const types = stringList(name, 'from.types', definition.from?.types);
  if (categories.length === 0 && types.length === 0) fail(name, 'from', 'must name at least one category or event type');
  for (const category of categories) if (category.includes('-')) fail(name, 'from.categories', `"${category}": a category is the stream name before the first "-" (give "invoice" for "invoice-*")`);
  const handlers = definition.handlers;
  if (handlers === null || typeof handlers !== 'object') fail(name, 'handlers', 'must be an object of functions keyed by event type');
  for (const [type, handler] of Object.entries(handlers)) if (typeof handler !== 'function') fail(name, `handlers.${type}`, 'must be a function');
  const deletes = stringList(name, 'deletes', definition.deletes);
  if (types.length > 0) {
    for (const type of [...Object.keys(handlers), ...deletes]) if (!types.includes(type)) fail(name, 'from.types', `does not select "${type}", which has a handler or is a delete`);
  }
  const batchSize = positiveInteger(name, 'batchSize', definition.batchSize ?? DEFAULT_BATCH_SIZE, 1);
  const onError = definition.onError ?? 'halt';
  if (onError !== 'park' && onError !== 'halt') fail(name, 'onError', `must be 'park' or 'halt' (found ${String(onError)})`);
  const count = positiveInteger(name, 'partition.count', definition.partition?.count ?? 1, 1);
  const index = definition.partition?.index ?? 0;
  if (!Number.isInteger(index) || index < 0 || index >= count) fail(name, 'partition.index', `must be an integer from 0 to ${count - 1} (found ${String(index)})`);
  if (definition.setup !== undefined && typeof definition.setup !== 'function') fail(name, 'setup', 'must be a function');
  const atomic = definition.atomic ?? 'batch';
  if (atomic !== 'batch' && atomic !== 'transaction') fail(name, 'atomic', `must be 'batch' or 'transaction' (found ${String(atomic)})`);
  return Object.freeze({
    name,
    categories,
    types,
    handlers,
    deletes: new Set(deletes),
    batchSize,
    onError,
    retry: retryOf(name, definition.retry),
    partition: { count, index },
    setup: definition.setup ?? null,
    atomic,
  });
}

/** Whether the projection reads this event (category, type and partition). */
export function selects(projection: Projection<any>, stream: string, type: string, partitionOfStream: number): boolean {
  if (projection.categories.length > 0) {
    const dash = stream.indexOf('-');
    if (dash <= 0 || !projection.categories.includes(stream.slice(0, dash))) return false;
  }
  if (projection.types.length > 0 && !projection.types.includes(type)) return false;
  return partitionOfStream === projection.partition.index;
}
