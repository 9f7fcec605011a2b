// Upcasters turn stored event data of an older contract version into the latest version, one
// step (vN → vN+1) at a time, so readers only ever handle the latest shape. Pure: an upcaster
// must not mutate its input nor do I/O.
import { ContractError } from './errors.js';
import { contractKey } from './document.js';
import type { ContractRegistry } from './registry.js';

/** One step `from` → `from + 1` of one event type. */
export interface Upcaster<TFrom = any, TTo = any> {
  readonly type: string;
  readonly from: number;
  /** Always `from + 1`: chains are built from single steps, so each step is small and tested alone. */
  readonly to: number;
  /** Returns the data in version `to`; must not mutate `data`. */
  up(data: TFrom): TTo;
}

/** Event data with its contract, e.g. as read from a stream (`type` and `version` from the event's metadata). */
export interface VersionedEventData<TData = unknown> {
  readonly type: string;
  readonly version: number;
  readonly data: TData;
}

/** Declares an upcaster; checks the step is a single version bump. @throws ContractError `UPCASTER_INVALID` */
export function defineUpcaster<TFrom, TTo>(definition: Upcaster<TFrom, TTo>): Upcaster<TFrom, TTo> {
  const { type, from, to, up } = definition;
  const problems: string[] = [];
  if (typeof type !== 'string' || type === '') problems.push('"type" must be the event type name');
  if (!Number.isInteger(from) || from < 1) problems.push(`"from" must be a positive integer (found ${String(from)})`);
  if (to !== from + 1) problems.push(`"to" must be from + 1 = ${from + 1} (found ${String(to)}); chain single steps instead`);
  if (typeof up !== 'function') problems.push('"up" must be a function');
  if (problems.length > 0) {
    throw new ContractError('UPCASTER_INVALID', `invalid upcaster ${String(type)} v${String(from)} → v${String(to)}: ${problems.join('; ')}`, { type, from, to, problems });
  }
  return Object.freeze({ type, from, to, up });
}

/**
 * Brings `event` to the latest version of its type (or `options.toVersion`), applying
 * `vN → vN+1` upcasters in turn, and validates the result against the target contract.
 *
 * @throws ContractError `CONTRACT_UNKNOWN` (type or version not in the registry),
 *   `UPCASTER_MISSING_STEP`, `UPCASTER_INVALID` (duplicate step, or a target below the event's version),
 *   `UPCAST_RESULT_INVALID` (the result does not satisfy the target contract; details carry the violations)
 */
export function upcast<TData = unknown>(
  registry: ContractRegistry,
  upcasters: readonly Upcaster[],
  event: VersionedEventData,
  options: { toVersion?: number } = {},
): VersionedEventData<TData> {
  const { type } = event;
  registry.get(type, event.version);
  const target = options.toVersion ?? registry.latestVersion(type);
  registry.get(type, target);
  if (target < event.version) {
    throw new ContractError('UPCASTER_INVALID', `cannot upcast ${contractKey(type, event.version)} down to v${target}`, { type, version: event.version, target });
  }
  const steps = indexUpcasters(upcasters);
  let data = event.data;
  for (let version = event.version; version < target; version++) {
    const step = steps.get(contractKey(type, version));
    if (!step) {
      throw new ContractError(
        'UPCASTER_MISSING_STEP',
        `no upcaster for ${type} v${version} → v${version + 1} (upcasting ${contractKey(type, event.version)} to v${target}); ` +
          `define one with defineUpcaster({ type: '${type}', from: ${version}, to: ${version + 1}, up })`,
        { type, from: version, to: version + 1, eventVersion: event.version, target },
      );
    }
    data = step.up(data);
  }
  const result = registry.validate(type, target, data);
  if (!result.ok) {
    const lines = result.violations.map((v) => `  ${v.path || '(root)'}: ${v.message} [${v.keyword}]`).join('\n');
    throw new ContractError(
      'UPCAST_RESULT_INVALID',
      `upcasting ${contractKey(type, event.version)} to v${target} produced data that does not satisfy ${contractKey(type, target)}:\n${lines}`,
      { type, version: event.version, target, violations: result.violations },
    );
  }
  return { type, version: target, data: data as TData };
}

/** Steps missing to bring every registered version of every type to its latest version (empty: complete). */
export function missingUpcasters(registry: ContractRegistry, upcasters: readonly Upcaster[]): { type: string; from: number; to: number }[] {
  const steps = indexUpcasters(upcasters);
  const missing: { type: string; from: number; to: number }[] = [];
  for (const type of registry.types()) {
    const latest = registry.latestVersion(type);
    for (let version = 1; version < latest; version++) {
      if (registry.has(type, version) && !steps.has(contractKey(type, version))) missing.push({ type, from: version, to: version + 1 });
    }
  }
  return missing;
}

function indexUpcasters(upcasters: readonly Upcaster[]): Map<string, Upcaster> {
  const index = new Map<string, Upcaster>();
  for (const upcaster of upcasters) {
    const key = contractKey(upcaster.type, upcaster.from);
    if (index.has(key)) {
      throw new ContractError('UPCASTER_INVALID', `two upcasters for ${upcaster.type} v${upcaster.from} → v${upcaster.to}; keep one`, { type: upcaster.type, from: upcaster.from });
    }
    index.set(key, upcaster);
  }
  return index;
}
