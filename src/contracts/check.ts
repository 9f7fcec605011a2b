// The CI gate over a contracts directory. Pure: it gets file contents (working tree and the
// published baseline) and returns findings; reading files and git lives in load.ts / git.ts.
//
// Rules:
// - every `*.json` file is `<Type>.v<N>.schema.json`, parses, is a valid contract document
//   (see document.ts) and compiles; `type@version` and `$id` are unique; versions of a type
//   are contiguous from 1;
// - a PUBLISHED version (present in the baseline, e.g. `HEAD` or `origin/main`) is immutable:
//   only the annotations in EDITABLE_ANNOTATIONS may change. Everything else — even an
//   additive change — is a violation: consumers and stored events already rely on that version;
//   publish the change as version N+1 instead. Deleting or renaming a published file is a violation;
// - a NEW version may be additive or breaking relative to the previous version (that is what a
//   new version is for); the report says which, as information.
import { compareSchemas, hasBreakingChange, type ContractChange } from './compatibility.js';
import { CONTRACT_FILE_NAME, contractKey, inspectContractDocument, parseContractFileName } from './document.js';
import { canonicalSchema, firstDifference } from './schema-walk.js';
import { createSchemaCompiler } from './validator.js';

/** A contract file's content; `path` is relative to the contracts directory, with `/`. */
export interface ContractFile {
  readonly path: string;
  readonly text: string;
}

/** Annotation keywords that may be edited in a published version: documentation only. */
export const EDITABLE_ANNOTATIONS: ReadonlySet<string> = new Set(['title', 'description', 'examples', '$comment', 'deprecated']);

export interface CheckInput {
  /** The files as they are now (working tree). */
  readonly current: readonly ContractFile[];
  /** The files as published (at the baseline ref); `undefined` skips the immutability rules. */
  readonly published?: readonly ContractFile[];
  /** How to print paths: the contracts directory as the user named it (default `contracts`). */
  readonly dir?: string;
}

export interface CheckFinding {
  /** Display path, e.g. `contracts/invoicing/InvoiceIssued.v1.schema.json`. */
  readonly file: string;
  readonly message: string;
}

export interface NewVersionReport {
  readonly file: string;
  readonly key: string;
  /** `initial`: v1; otherwise relative to version N-1. */
  readonly classification: 'initial' | 'breaking' | 'additive' | 'unchanged';
  readonly changes: readonly ContractChange[];
}

export interface CheckReport {
  readonly contracts: number;
  readonly violations: readonly CheckFinding[];
  readonly newVersions: readonly NewVersionReport[];
}

/** `file: message`, the one-line form printed by `contracts check`. */
export function formatFinding(finding: CheckFinding): string {
  return `${finding.file}: ${finding.message}`;
}

interface Parsed {
  readonly file: ContractFile;
  readonly display: string;
  readonly schema: unknown;
}

export function checkContracts(input: CheckInput): CheckReport {
  const dir = (input.dir ?? 'contracts').replace(/\/+$/, '');
  const display = (path: string) => (dir === '' || dir === '.' ? path : `${dir}/${path}`);
  const violations: CheckFinding[] = [];
  const violation = (path: string, message: string) => violations.push({ file: display(path), message });

  // 1. Names, JSON, document envelope, compilation.
  const valid = new Map<string, Parsed & { type: string; version: number; id: string }>();
  for (const file of [...input.current].sort((a, b) => (a.path < b.path ? -1 : 1))) {
    if (!parseContractFileName(file.path)) {
      violation(file.path, `file name must be <Type>.v<N>.schema.json (pattern ${CONTRACT_FILE_NAME.source})`);
      continue;
    }
    const parsed = parseJson(file.text);
    if (!parsed.ok) {
      violation(file.path, `not valid JSON: ${parsed.error}`);
      continue;
    }
    const { identity, problems } = inspectContractDocument({ source: file.path, schema: parsed.value });
    for (const problem of problems) violation(file.path, problem);
    if (!identity) continue;
    try {
      createSchemaCompiler().compile(parsed.value as object);
    } catch (error) {
      violation(file.path, `schema does not compile: ${(error as Error).message}`);
      continue;
    }
    valid.set(file.path, { file, display: display(file.path), schema: parsed.value, ...identity });
  }

  // 2. Uniqueness of type@version and $id.
  const byKey = new Map<string, string>();
  const byId = new Map<string, string>();
  for (const [path, contract] of valid) {
    const key = contractKey(contract.type, contract.version);
    const sameKey = byKey.get(key);
    if (sameKey !== undefined) violation(path, `contract ${key} is also defined by ${display(sameKey)}`);
    else byKey.set(key, path);
    const sameId = byId.get(contract.id);
    if (sameId !== undefined) violation(path, `"$id" ${contract.id} is also used by ${display(sameId)}`);
    else byId.set(contract.id, path);
  }

  // 3. Contiguous versions per type — by file name, so a broken file is reported once, not also as a gap.
  const versionsByType = new Map<string, Map<number, string>>();
  for (const file of input.current) {
    const named = parseContractFileName(file.path);
    if (!named) continue;
    const versions = versionsByType.get(named.type) ?? new Map<number, string>();
    if (!versions.has(named.version)) versions.set(named.version, file.path);
    versionsByType.set(named.type, versions);
  }
  for (const [type, versions] of [...versionsByType].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const max = Math.max(...versions.keys());
    const missing = Array.from({ length: max }, (_, i) => i + 1).filter((version) => !versions.has(version));
    if (missing.length > 0) {
      violation(versions.get(max)!, `versions of ${type} must be contiguous from 1: missing ${missing.map((v) => `v${v}`).join(', ')}`);
    }
  }

  // 4. Published versions are immutable.
  const publishedPaths = new Set<string>();
  for (const published of [...(input.published ?? [])].sort((a, b) => (a.path < b.path ? -1 : 1))) {
    if (!parseContractFileName(published.path)) continue;
    publishedPaths.add(published.path);
    const before = parseJson(published.text);
    if (!before.ok) continue; // The baseline was broken already; nothing to hold the file to.
    const now = input.current.find((file) => file.path === published.path);
    if (!now) {
      violation(published.path, 'a published version was deleted or renamed; published versions are immutable — restore the file');
      continue;
    }
    if (now.text === published.text) continue;
    const after = parseJson(now.text);
    if (!after.ok) continue; // Reported in step 1.
    for (const message of immutabilityViolations(before.value, after.value)) violation(published.path, message);
  }

  // 5. New versions: additive or breaking relative to the previous one (information).
  const newVersions: NewVersionReport[] = [];
  for (const [path, contract] of [...valid].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (input.published !== undefined && publishedPaths.has(path)) continue;
    const key = contractKey(contract.type, contract.version);
    if (contract.version === 1) {
      newVersions.push({ file: contract.display, key, classification: 'initial', changes: [] });
      continue;
    }
    const previousPath = versionsByType.get(contract.type)?.get(contract.version - 1);
    const previous = previousPath === undefined ? undefined : valid.get(previousPath);
    if (!previous) continue; // The version gap is reported above.
    const changes = compareSchemas(previous.schema, contract.schema).filter((change) => change.kind !== 'annotation-changed');
    const classification = changes.length === 0 ? 'unchanged' : hasBreakingChange(changes) ? 'breaking' : 'additive';
    newVersions.push({ file: contract.display, key, classification, changes });
  }

  return { contracts: valid.size, violations, newVersions };
}

/** Why `after` is not an allowed edit of the published `before` (empty: only documentation changed). */
export function immutabilityViolations(before: unknown, after: unknown): string[] {
  const canonicalBefore = canonicalSchema(before, EDITABLE_ANNOTATIONS);
  const canonicalAfter = canonicalSchema(after, EDITABLE_ANNOTATIONS);
  const difference = firstDifference(canonicalBefore, canonicalAfter);
  if (difference === undefined) return [];
  const changes = compareSchemas(before, after).filter((change) => !(change.kind === 'annotation-changed' && EDITABLE_ANNOTATIONS.has(change.keyword)));
  if (changes.length === 0) {
    // Not a data-shape change compareSchemas classifies (an identity keyword, an unreferenced $defs entry, …).
    return [`edit of a published version: changed ${difference || '(root)'} (only ${[...EDITABLE_ANNOTATIONS].join(', ')} may be edited; publish a new version instead)`];
  }
  return changes.map((change) => `${change.breaking ? 'breaking' : 'non-breaking'} edit of a published version: ${change.message}`);
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}
