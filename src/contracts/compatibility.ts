// Compares two versions of a contract schema and classifies every change as breaking or
// non-breaking. The rule behind the table: a change is BREAKING when some event valid under the
// old schema is invalid under the new one, or when a field consumers could read disappears
// (removed or renamed). Pure: no I/O.
//
// `$ref`s to the same document (`#/$defs/money`) are followed, so paths read like the data:
// `/properties/total/properties/amount`, not `/$defs/money/properties/amount`.
import { isPlainObject } from './document.js';
import { SCHEMA_ARRAY_KEYWORDS, SCHEMA_MAP_KEYWORDS, SCHEMA_KEYWORDS, canonicalSchema, jsonEqual, resolveLocalRef } from './schema-walk.js';

export type ContractChangeKind =
  | 'field-removed'
  | 'field-renamed'
  | 'field-added-required'
  | 'field-added-optional'
  | 'field-became-required'
  | 'field-became-optional'
  | 'type-narrowed'
  | 'type-widened'
  | 'type-changed'
  | 'enum-value-removed'
  | 'enum-value-added'
  | 'constraint-tightened'
  | 'constraint-loosened'
  | 'annotation-changed'
  | 'keyword-changed';

export interface ContractChange {
  readonly kind: ContractChangeKind;
  readonly breaking: boolean;
  /** JSON pointer into the schema (through resolved `$ref`s); `''` is the root. */
  readonly path: string;
  /** The keyword concerned (`properties`, `type`, `maxLength`, `description`, …). */
  readonly keyword: string;
  /** One line for humans, e.g. `removed field /properties/total`. */
  readonly message: string;
  readonly before?: unknown;
  readonly after?: unknown;
}

/**
 * Annotations: they change no validation outcome, so editing them is non-breaking.
 * (Which of them may be edited in a PUBLISHED version is decided by check.ts.)
 */
export const ANNOTATION_KEYWORDS: ReadonlySet<string> = new Set([
  'title',
  'description',
  'examples',
  '$comment',
  'deprecated',
  'default',
  'readOnly',
  'writeOnly',
  'contentEncoding',
  'contentMediaType',
]);

/** Root keywords that identify a document rather than constrain data; they differ between versions by design. */
const IDENTITY_KEYWORDS: ReadonlySet<string> = new Set(['$id', 'x-event-type', 'x-event-version']);

const UPPER_BOUNDS = ['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems', 'maxProperties', 'maxContains'] as const;
const LOWER_BOUNDS = ['minimum', 'exclusiveMinimum', 'minLength', 'minItems', 'minProperties', 'minContains'] as const;

/** Keywords compared by dedicated rules below; everything else falls to the conservative fallback. */
const HANDLED = new Set<string>([
  '$ref',
  '$defs',
  'definitions',
  '$schema',
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'prefixItems',
  'allOf',
  'anyOf',
  'oneOf',
  'enum',
  'const',
  'pattern',
  'format',
  'multipleOf',
  'uniqueItems',
  ...UPPER_BOUNDS,
  ...LOWER_BOUNDS,
]);

/** True if any change is breaking. */
export function hasBreakingChange(changes: readonly ContractChange[]): boolean {
  return changes.some((change) => change.breaking);
}

/** Compares `before` (the old version) with `after` (the new one). Changes come in a stable order. */
export function compareSchemas(before: unknown, after: unknown): ContractChange[] {
  const changes: ContractChange[] = [];
  const context: Context = { rootBefore: before, rootAfter: after, changes, visiting: new Set() };
  compareNode(context, before, after, '', true);
  return changes;
}

interface Context {
  readonly rootBefore: unknown;
  readonly rootAfter: unknown;
  readonly changes: ContractChange[];
  /** Pairs of `$ref`s being compared, to stop on recursive schemas. */
  readonly visiting: Set<string>;
}

type Schema = Record<string, unknown>;

function show(path: string): string {
  return path === '' ? '(root)' : path;
}

function add(context: Context, change: Omit<ContractChange, 'message'>, message: string): void {
  context.changes.push({ ...change, message });
}

function tightened(context: Context, path: string, keyword: string, message: string, before?: unknown, after?: unknown): void {
  add(context, { kind: 'constraint-tightened', breaking: true, path, keyword, before, after }, message);
}

function loosened(context: Context, path: string, keyword: string, message: string, before?: unknown, after?: unknown): void {
  add(context, { kind: 'constraint-loosened', breaking: false, path, keyword, before, after }, message);
}

/** `$ref` siblings apply together with the target (2020-12); merging them is the approximation used here. */
function resolve(root: unknown, node: unknown): { schema: unknown; ref?: string } {
  if (!isPlainObject(node) || typeof node.$ref !== 'string') return { schema: node };
  const target = resolveLocalRef(root, node.$ref);
  if (!isPlainObject(target)) return { schema: node };
  const { $ref: _ref, ...siblings } = node;
  const inner = resolve(root, target);
  return { schema: isPlainObject(inner.schema) ? { ...inner.schema, ...siblings } : inner.schema, ref: node.$ref };
}

function compareNode(context: Context, rawBefore: unknown, rawAfter: unknown, path: string, isRoot = false): void {
  const resolvedBefore = resolve(context.rootBefore, rawBefore);
  const resolvedAfter = resolve(context.rootAfter, rawAfter);
  if (resolvedBefore.ref !== undefined || resolvedAfter.ref !== undefined) {
    const pair = `${resolvedBefore.ref ?? ''}|${resolvedAfter.ref ?? ''}`;
    // A recursive schema reached the same pair of definitions again: it is being compared already.
    if (context.visiting.has(pair)) return;
    context.visiting.add(pair);
    try {
      compareResolved(context, resolvedBefore.schema, resolvedAfter.schema, path, isRoot);
    } finally {
      context.visiting.delete(pair);
    }
    return;
  }
  compareResolved(context, resolvedBefore.schema, resolvedAfter.schema, path, isRoot);
}

function compareResolved(context: Context, before: unknown, after: unknown, path: string, isRoot: boolean): void {
  // Boolean schemas: `true` accepts anything (same as `{}`), `false` nothing.
  if (before === false || after === false) {
    if (before === after) return;
    if (after === false) tightened(context, path, 'false', `${show(path)} accepts no value any more (schema became false)`, before, after);
    else loosened(context, path, 'false', `${show(path)} accepts values again (schema was false)`, before, after);
    return;
  }
  const a: Schema = before === true || before === undefined ? {} : isPlainObject(before) ? before : {};
  const b: Schema = after === true || after === undefined ? {} : isPlainObject(after) ? after : {};

  compareAnnotations(context, a, b, path);
  // A value that changed kind (string → object) is one breaking change; listing the object's
  // "new" fields on top of it would only be noise.
  if (compareType(context, a, b, path) === 'changed') return;
  compareProperties(context, a, b, path);
  compareAdditionalProperties(context, a, b, path);
  compareSubschema(context, a.items, b.items, `${path}/items`);
  compareSchemaArrays(context, a, b, path);
  compareEnum(context, a, b, path);
  compareConst(context, a, b, path);
  compareBounds(context, a, b, path);
  compareStringRules(context, a, b, path);
  if (a.multipleOf !== b.multipleOf) compareMultipleOf(context, a.multipleOf, b.multipleOf, path);
  if ((a.uniqueItems === true) !== (b.uniqueItems === true)) {
    if (b.uniqueItems === true) tightened(context, path, 'uniqueItems', `array items of ${show(path)} must now be unique`, a.uniqueItems, b.uniqueItems);
    else loosened(context, path, 'uniqueItems', `array items of ${show(path)} need not be unique any more`, a.uniqueItems, b.uniqueItems);
  }
  if (isRoot && a.$schema !== b.$schema) {
    add(context, { kind: 'keyword-changed', breaking: true, path, keyword: '$schema', before: a.$schema, after: b.$schema }, `changed the JSON Schema dialect ($schema) from ${JSON.stringify(a.$schema)} to ${JSON.stringify(b.$schema)}`);
  }
  compareOtherKeywords(context, a, b, path, isRoot);
}

function compareAnnotations(context: Context, a: Schema, b: Schema, path: string): void {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((key) => ANNOTATION_KEYWORDS.has(key) || (key.startsWith('x-') && !IDENTITY_KEYWORDS.has(key)));
  for (const key of keys.sort()) {
    if (jsonEqual(a[key], b[key])) continue;
    const verb = a[key] === undefined ? 'added' : b[key] === undefined ? 'removed' : 'changed';
    add(context, { kind: 'annotation-changed', breaking: false, path, keyword: key, before: a[key], after: b[key] }, `${verb} ${key} of ${show(path)}`);
  }
}

const JSON_TYPES = ['array', 'boolean', 'integer', 'null', 'number', 'object', 'string'];

/** The `type` keyword as a set; undefined means "any type". */
function typeSet(schema: Schema): Set<string> | undefined {
  const type = schema.type;
  if (typeof type === 'string') return new Set([type]);
  if (Array.isArray(type)) return new Set(type.filter((t): t is string => typeof t === 'string'));
  return undefined;
}

function covers(types: Set<string> | undefined, type: string): boolean {
  return types === undefined || types.has(type) || (type === 'integer' && types.has('number'));
}

function compareType(context: Context, a: Schema, b: Schema, path: string): 'same' | 'widened' | 'narrowed' | 'changed' {
  const before = typeSet(a);
  const after = typeSet(b);
  const beforeTypes = before ?? new Set(JSON_TYPES);
  const afterTypes = after ?? new Set(JSON_TYPES);
  const keptAll = [...beforeTypes].every((type) => covers(after, type));
  const coveredBefore = [...afterTypes].every((type) => covers(before, type));
  if (keptAll && coveredBefore) return 'same';
  const shown = (schema: Schema) => (schema.type === undefined ? 'any' : JSON.stringify(schema.type));
  if (keptAll) {
    add(context, { kind: 'type-widened', breaking: false, path, keyword: 'type', before: a.type, after: b.type }, `widened type of ${show(path)} from ${shown(a)} to ${shown(b)}`);
    return 'widened';
  }
  if (coveredBefore) {
    add(context, { kind: 'type-narrowed', breaking: true, path, keyword: 'type', before: a.type, after: b.type }, `narrowed type of ${show(path)} from ${shown(a)} to ${shown(b)}`);
    return 'narrowed';
  }
  add(context, { kind: 'type-changed', breaking: true, path, keyword: 'type', before: a.type, after: b.type }, `changed type of ${show(path)} from ${shown(a)} to ${shown(b)}`);
  return 'changed';
}

function stringSet(value: unknown): Set<string> {
  return new Set(Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);
}

function objectOf(value: unknown): Schema {
  return isPlainObject(value) ? value : {};
}

function compareProperties(context: Context, a: Schema, b: Schema, path: string): void {
  const propsBefore = objectOf(a.properties);
  const propsAfter = objectOf(b.properties);
  const requiredBefore = stringSet(a.required);
  const requiredAfter = stringSet(b.required);
  const removed = Object.keys(propsBefore).filter((name) => !(name in propsAfter)).sort();
  const added = Object.keys(propsAfter).filter((name) => !(name in propsBefore)).sort();
  const field = (name: string) => `${path}/properties/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`;

  // Renames: a removed and an added field of the same type. An exact shape match pairs first.
  const renamedTo = new Map<string, string>();
  const taken = new Set<string>();
  const shapeBefore = (name: string) => canonicalSchema(resolve(context.rootBefore, propsBefore[name]).schema, ANNOTATION_KEYWORDS);
  const shapeAfter = (name: string) => canonicalSchema(resolve(context.rootAfter, propsAfter[name]).schema, ANNOTATION_KEYWORDS);
  const typeKey = (shape: unknown) => (isPlainObject(shape) && shape.type !== undefined ? JSON.stringify(typeof shape.type === 'string' ? [shape.type] : [...(shape.type as unknown[])].sort()) : undefined);
  for (const match of [(x: string, y: string) => jsonEqual(shapeBefore(x), shapeAfter(y)), (x: string, y: string) => typeKey(shapeBefore(x)) !== undefined && typeKey(shapeBefore(x)) === typeKey(shapeAfter(y))]) {
    for (const name of removed) {
      if (renamedTo.has(name)) continue;
      const partner = added.find((candidate) => !taken.has(candidate) && match(name, candidate));
      if (partner !== undefined) {
        renamedTo.set(name, partner);
        taken.add(partner);
      }
    }
  }

  for (const name of removed) {
    const partner = renamedTo.get(name);
    if (partner !== undefined) {
      add(context, { kind: 'field-renamed', breaking: true, path: field(name), keyword: 'properties', before: name, after: partner }, `renamed field ${field(name)} to ${field(partner)} (removed + added of the same type: readers of "${name}" break)`);
    } else {
      add(context, { kind: 'field-removed', breaking: true, path: field(name), keyword: 'properties', before: name }, `removed field ${field(name)}`);
    }
  }
  for (const name of added) {
    if (taken.has(name)) continue;
    if (requiredAfter.has(name)) add(context, { kind: 'field-added-required', breaking: true, path: field(name), keyword: 'required', after: name }, `added required field ${field(name)}`);
    else add(context, { kind: 'field-added-optional', breaking: false, path: field(name), keyword: 'properties', after: name }, `added optional field ${field(name)}`);
  }
  for (const name of Object.keys(propsBefore).filter((key) => key in propsAfter).sort()) {
    if (!requiredBefore.has(name) && requiredAfter.has(name)) {
      add(context, { kind: 'field-became-required', breaking: true, path: field(name), keyword: 'required', after: name }, `field ${field(name)} became required`);
    } else if (requiredBefore.has(name) && !requiredAfter.has(name)) {
      add(context, { kind: 'field-became-optional', breaking: false, path: field(name), keyword: 'required', before: name }, `field ${field(name)} became optional`);
    }
    compareNode(context, propsBefore[name], propsAfter[name], field(name));
  }
  // Required names without a `properties` entry on either side.
  const declared = (name: string) => name in propsBefore || name in propsAfter;
  for (const name of [...requiredAfter].filter((n) => !requiredBefore.has(n) && !declared(n)).sort()) {
    tightened(context, field(name), 'required', `property ${field(name)} became required`, undefined, name);
  }
  for (const name of [...requiredBefore].filter((n) => !requiredAfter.has(n) && !declared(n)).sort()) {
    loosened(context, field(name), 'required', `property ${field(name)} is no longer required`, name, undefined);
  }
}

function compareAdditionalProperties(context: Context, a: Schema, b: Schema, path: string): void {
  const before = a.additionalProperties ?? true;
  const after = b.additionalProperties ?? true;
  if (typeof before === 'boolean' && typeof after === 'boolean') {
    if (before === after) return;
    if (!after) add(context, { kind: 'constraint-tightened', breaking: true, path, keyword: 'additionalProperties', before, after }, `closed ${show(path)} to unknown properties (additionalProperties true → false)`);
    else add(context, { kind: 'constraint-loosened', breaking: false, path, keyword: 'additionalProperties', before, after }, `opened ${show(path)} to unknown properties (additionalProperties false → true)`);
    return;
  }
  compareSubschema(context, before, after, `${path}/additionalProperties`);
}

/** A keyword whose value is one subschema; absent means `true`. */
function compareSubschema(context: Context, before: unknown, after: unknown, path: string): void {
  if (before === undefined && after === undefined) return;
  compareNode(context, before ?? true, after ?? true, path);
}

function compareSchemaArrays(context: Context, a: Schema, b: Schema, path: string): void {
  for (const keyword of ['prefixItems', 'allOf', 'anyOf', 'oneOf']) {
    const before = a[keyword];
    const after = b[keyword];
    if (before === undefined && after === undefined) continue;
    if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
      before.forEach((item, index) => compareNode(context, item, after[index], `${path}/${keyword}/${index}`));
      continue;
    }
    const shape = (root: unknown, value: unknown) => (Array.isArray(value) ? value.map((item) => canonicalSchema(resolve(root, item).schema, ANNOTATION_KEYWORDS)) : value);
    if (jsonEqual(shape(context.rootBefore, before), shape(context.rootAfter, after))) continue;
    add(context, { kind: 'keyword-changed', breaking: true, path, keyword, before, after }, `changed ${keyword} of ${show(path)} (not classified further; treated as breaking)`);
  }
}

function compareEnum(context: Context, a: Schema, b: Schema, path: string): void {
  if (a.enum === undefined && b.enum === undefined) return;
  if (!Array.isArray(b.enum)) {
    loosened(context, path, 'enum', `removed the enum of ${show(path)}`, a.enum, b.enum);
    return;
  }
  if (!Array.isArray(a.enum)) {
    tightened(context, path, 'enum', `restricted ${show(path)} to the values ${JSON.stringify(b.enum)}`, a.enum, b.enum);
    return;
  }
  const afterValues = b.enum.map((value) => JSON.stringify(value));
  const beforeValues = a.enum.map((value) => JSON.stringify(value));
  for (const value of a.enum) {
    if (!afterValues.includes(JSON.stringify(value))) {
      add(context, { kind: 'enum-value-removed', breaking: true, path, keyword: 'enum', before: value }, `removed enum value ${JSON.stringify(value)} from ${show(path)}`);
    }
  }
  for (const value of b.enum) {
    if (!beforeValues.includes(JSON.stringify(value))) {
      add(context, { kind: 'enum-value-added', breaking: false, path, keyword: 'enum', after: value }, `added enum value ${JSON.stringify(value)} to ${show(path)}`);
    }
  }
}

function compareConst(context: Context, a: Schema, b: Schema, path: string): void {
  if (!('const' in a) && !('const' in b)) return;
  if ('const' in a && 'const' in b && jsonEqual(a.const, b.const)) return;
  if (!('const' in b)) loosened(context, path, 'const', `removed the const of ${show(path)}`, a.const, undefined);
  else tightened(context, path, 'const', `${'const' in a ? 'changed' : 'added'} const ${JSON.stringify(b.const)} of ${show(path)}`, a.const, b.const);
}

function compareBounds(context: Context, a: Schema, b: Schema, path: string): void {
  const check = (keyword: string, isUpper: boolean) => {
    const before = a[keyword];
    const after = b[keyword];
    if (before === after || (typeof before !== 'number' && typeof after !== 'number')) return;
    if (typeof before !== 'number') return tightened(context, path, keyword, `added ${keyword} ${String(after)} to ${show(path)}`, before, after);
    if (typeof after !== 'number') return loosened(context, path, keyword, `removed ${keyword} ${before} from ${show(path)}`, before, after);
    const tighter = isUpper ? after < before : after > before;
    const message = `${isUpper === tighter ? 'lowered' : 'raised'} ${keyword} of ${show(path)} from ${before} to ${after}`;
    if (tighter) tightened(context, path, keyword, message, before, after);
    else loosened(context, path, keyword, message, before, after);
  };
  for (const keyword of UPPER_BOUNDS) check(keyword, true);
  for (const keyword of LOWER_BOUNDS) check(keyword, false);
}

function compareStringRules(context: Context, a: Schema, b: Schema, path: string): void {
  for (const keyword of ['pattern', 'format']) {
    const before = a[keyword];
    const after = b[keyword];
    if (before === after) continue;
    if (after === undefined) loosened(context, path, keyword, `removed ${keyword} ${JSON.stringify(before)} from ${show(path)}`, before, after);
    else if (before === undefined) tightened(context, path, keyword, `added ${keyword} ${JSON.stringify(after)} to ${show(path)}`, before, after);
    else tightened(context, path, keyword, `changed ${keyword} of ${show(path)} from ${JSON.stringify(before)} to ${JSON.stringify(after)}`, before, after);
  }
}

function compareMultipleOf(context: Context, before: unknown, after: unknown, path: string): void {
  if (typeof after !== 'number') return loosened(context, path, 'multipleOf', `removed multipleOf from ${show(path)}`, before, after);
  if (typeof before !== 'number') return tightened(context, path, 'multipleOf', `added multipleOf ${after} to ${show(path)}`, before, after);
  // Every multiple of `before` is a multiple of `after` iff before/after is an integer.
  const ratio = before / after;
  if (Math.abs(ratio - Math.round(ratio)) < 1e-9) loosened(context, path, 'multipleOf', `changed multipleOf of ${show(path)} from ${before} to ${after}`, before, after);
  else tightened(context, path, 'multipleOf', `changed multipleOf of ${show(path)} from ${before} to ${after}`, before, after);
}

/** Any keyword without a rule above: equal (ignoring annotations inside) or a conservative breaking change. */
function compareOtherKeywords(context: Context, a: Schema, b: Schema, path: string, isRoot: boolean): void {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  for (const key of keys) {
    if (HANDLED.has(key) || ANNOTATION_KEYWORDS.has(key) || key.startsWith('x-')) continue;
    if (isRoot && IDENTITY_KEYWORDS.has(key)) continue;
    const isSchemaValued = (SCHEMA_KEYWORDS as readonly string[]).includes(key) || (SCHEMA_MAP_KEYWORDS as readonly string[]).includes(key) || (SCHEMA_ARRAY_KEYWORDS as readonly string[]).includes(key);
    const shape = (value: unknown) => (isSchemaValued ? canonicalSchema({ [key]: value }, ANNOTATION_KEYWORDS) : value);
    if (jsonEqual(shape(a[key]), shape(b[key]))) continue;
    add(context, { kind: 'keyword-changed', breaking: true, path, keyword: key, before: a[key], after: b[key] }, `changed ${key} of ${show(path)} (not classified further; treated as breaking)`);
  }
}
