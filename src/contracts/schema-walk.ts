// Schema-aware helpers shared by compatibility.ts and check.ts. "Schema-aware" matters: the
// keys under `properties` are field names, not keywords — an event field called `description`
// is data shape, not an annotation. Pure.
import { isPlainObject } from './document.js';

/** Keywords whose value is one subschema. */
export const SCHEMA_KEYWORDS = [
  'additionalProperties',
  'items',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
  'unevaluatedItems',
  'unevaluatedProperties',
  'contentSchema',
] as const;
/** Keywords whose value maps names to subschemas. */
export const SCHEMA_MAP_KEYWORDS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'] as const;
/** Keywords whose value is an array of subschemas. */
export const SCHEMA_ARRAY_KEYWORDS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'] as const;

const schemaKeywords = new Set<string>(SCHEMA_KEYWORDS);
const mapKeywords = new Set<string>(SCHEMA_MAP_KEYWORDS);
const arrayKeywords = new Set<string>(SCHEMA_ARRAY_KEYWORDS);

/**
 * A copy of `schema` without the given keywords at any schema position, with object keys
 * sorted and `required` sorted (it is a set), so two semantically equal schemas serialize equally.
 */
export function canonicalSchema(schema: unknown, dropKeywords: ReadonlySet<string>): unknown {
  if (!isPlainObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(schema).sort()) {
    if (dropKeywords.has(key)) continue;
    const value = schema[key];
    if (schemaKeywords.has(key)) out[key] = canonicalSchema(value, dropKeywords);
    else if (mapKeywords.has(key) && isPlainObject(value)) {
      const map: Record<string, unknown> = {};
      for (const name of Object.keys(value).sort()) map[name] = canonicalSchema(value[name], dropKeywords);
      out[key] = map;
    } else if (arrayKeywords.has(key) && Array.isArray(value)) out[key] = value.map((item) => canonicalSchema(item, dropKeywords));
    else if (key === 'required' && Array.isArray(value)) out[key] = [...value].sort();
    else out[key] = sortKeysDeep(value);
  }
  return out;
}

function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeysDeep(value[key]);
  return out;
}

/** Deep equality of JSON values (object key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeysDeep(a)) === JSON.stringify(sortKeysDeep(b));
}

/** The JSON pointer of the first place where two JSON values differ, or undefined if equal. */
export function firstDifference(a: unknown, b: unknown, path = ''): string | undefined {
  if (jsonEqual(a, b)) return undefined;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return path;
    for (let i = 0; i < a.length; i++) {
      const found = firstDifference(a[i], b[i], `${path}/${i}`);
      if (found !== undefined) return found;
    }
    return path;
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    for (const key of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const found = firstDifference(a[key], b[key], `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`);
      if (found !== undefined) return found;
    }
  }
  return path;
}

/** Resolves a same-document `$ref` (`#`, `#/$defs/x`, `#/properties/a/items`). Undefined if it is not a local pointer or does not resolve. */
export function resolveLocalRef(root: unknown, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const segment = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) node = node[Number(segment)];
    else if (isPlainObject(node)) node = node[segment];
    else return undefined;
    if (node === undefined) return undefined;
  }
  return node;
}
