// Generates one TypeScript module from the contracts: a data type per contract (`InvoiceIssuedV2`),
// `EventContracts` keyed `type@version`, and `LatestEventContracts` keyed by type. The mapping
// helper types mapper output with `EventContracts`. Pure: schemas in, source text out (no file
// or network access — `$ref`s are same-document only).
import { compile } from 'json-schema-to-typescript';
import { isPlainObject } from './document.js';
import type { Contract } from './registry.js';
import { SCHEMA_ARRAY_KEYWORDS, SCHEMA_KEYWORDS, SCHEMA_MAP_KEYWORDS, resolveLocalRef } from './schema-walk.js';

export interface GenerateOptions {
  /** The command that regenerates the file, written into the header. */
  readonly command: string;
}

/** `InvoiceIssued` v2 → `InvoiceIssuedV2`. */
export function contractTypeName(type: string, version: number): string {
  return `${type}V${version}`;
}

/** The module text. Deterministic: contracts sorted by type then version, no timestamps or paths beyond `command`. */
export async function generateContractTypes(contracts: readonly Pick<Contract, 'type' | 'version' | 'schema'>[], options: GenerateOptions): Promise<string> {
  const sorted = [...contracts].sort((a, b) => (a.type === b.type ? a.version - b.version : a.type < b.type ? -1 : 1));
  const bodies: string[] = [];
  for (const contract of sorted) {
    const name = contractTypeName(contract.type, contract.version);
    const code = await compile(namedForCodegen(contract.schema, name) as Parameters<typeof compile>[0], name, {
      bannerComment: '',
      additionalProperties: false,
      declareExternallyReferenced: true,
      enableConstEnums: false,
      ignoreMinAndMaxItems: true,
      strictIndexSignatures: true,
      unknownAny: true,
      unreachableDefinitions: false,
      format: true,
      style: { singleQuote: true, printWidth: 120, trailingComma: 'all' },
      $refOptions: { resolve: { external: false } },
    });
    bodies.push(`// ${contract.type} v${contract.version}\n${code.trim()}`);
  }
  const latest = new Map<string, number>();
  for (const contract of sorted) latest.set(contract.type, Math.max(latest.get(contract.type) ?? 0, contract.version));

  return [
    `// generated — do not edit. Regenerate with: ${options.command}`,
    '// One data type per JSON Schema contract (`<Type>V<N>`), plus the maps below.',
    '',
    bodies.join('\n\n'),
    '',
    '/** Event data type per contract, keyed `type@version`. */',
    'export interface EventContracts {',
    ...sorted.map((c) => `  '${c.type}@${c.version}': ${contractTypeName(c.type, c.version)};`),
    '}',
    '',
    '/** Event data type of the latest version of each event type. */',
    'export type LatestEventContracts = {',
    ...[...latest].map(([type, version]) => `  ${type}: ${contractTypeName(type, version)};`),
    '};',
    '',
    '/** The latest version number of each event type. */',
    'export type LatestEventVersions = {',
    ...[...latest].map(([type, version]) => `  ${type}: ${version};`),
    '};',
    '',
  ].join('\n');
}

/**
 * json-schema-to-typescript names declarations after `title`s. Contracts share definition names
 * (`line`, `money`) and their titles are prose, so: the root is titled with the contract's type
 * name, each `$defs` entry `<TypeName><Def>` (unique across the module), and nested titles are
 * dropped so nothing else becomes a separately named (and possibly clashing) declaration.
 */
function namedForCodegen(schema: Readonly<Record<string, unknown>>, name: string): Record<string, unknown> {
  const copy = stripNestedTitles(structuredClone(schema)) as Record<string, unknown>;
  inlineScalarRefs(copy, copy, 0);
  copy.title = name;
  for (const keyword of ['$defs', 'definitions']) {
    const defs = copy[keyword];
    if (!isPlainObject(defs)) continue;
    for (const [key, def] of Object.entries(defs)) {
      if (isPlainObject(def)) def.title = `${name}${pascalCase(key)}`;
    }
  }
  return copy;
}

/**
 * A `$ref` to a non-object definition (`decimal`: a string with a pattern) is inlined, merged
 * with its siblings (the field's description): otherwise each `$ref` + description becomes its
 * own alias (`Decimal1`, `Decimal2`, …) that says less than `string`.
 */
function inlineScalarRefs(root: Record<string, unknown>, node: unknown, depth: number): void {
  if (!isPlainObject(node) || depth > 64) return;
  forEachSubschema(node, (child, replace) => {
    if (typeof child.$ref === 'string') {
      const target = resolveLocalRef(root, child.$ref);
      if (isPlainObject(target) && target.type !== 'object' && target.$ref === undefined) {
        const { $ref: _ref, ...siblings } = child;
        const { title: _title, ...definition } = structuredClone(target);
        replace({ ...definition, ...siblings });
        return;
      }
    }
    inlineScalarRefs(root, child, depth + 1);
  });
}

function forEachSubschema(node: Record<string, unknown>, visit: (child: Record<string, unknown>, replace: (value: unknown) => void) => void): void {
  for (const keyword of SCHEMA_KEYWORDS) {
    const child = node[keyword];
    if (isPlainObject(child)) visit(child, (value) => (node[keyword] = value));
  }
  for (const keyword of SCHEMA_ARRAY_KEYWORDS) {
    const list = node[keyword];
    if (Array.isArray(list)) list.forEach((child, index) => isPlainObject(child) && visit(child, (value) => (list[index] = value)));
  }
  for (const keyword of SCHEMA_MAP_KEYWORDS) {
    const map = node[keyword];
    if (isPlainObject(map)) for (const [key, child] of Object.entries(map)) if (isPlainObject(child)) visit(child, (value) => (map[key] = value));
  }
}

function stripNestedTitles(node: unknown): unknown {
  if (isPlainObject(node)) {
    forEachSubschema(node, (child) => {
      delete child.title;
      stripNestedTitles(child);
    });
  }
  return node;
}

function pascalCase(key: string): string {
  return key
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}
