// The contract registry: every loaded contract keyed by `type@version`, with its validator
// compiled once at construction. Pure: documents come in already loaded (see load.ts).
import { ContractError } from './errors.js';
import { contractKey, inspectContractDocument, type ContractDocument, type ContractIdentity } from './document.js';
import { createSchemaCompiler, type ContractViolation, type DataValidator, type ValidationResult } from './validator.js';

/** One registered contract. */
export interface Contract extends ContractIdentity {
  /** `type@version` */
  readonly key: string;
  /** Where the document came from (file path or label). */
  readonly source: string;
  /** The JSON Schema (a private copy; do not mutate). */
  readonly schema: Readonly<Record<string, unknown>>;
}

export interface ContractRegistry {
  /** All contracts, sorted by type, then version. */
  list(): readonly Contract[];
  /** Event types, sorted. */
  types(): readonly string[];
  has(type: string, version: number): boolean;
  /** @throws ContractError `CONTRACT_UNKNOWN` */
  get(type: string, version: number): Contract;
  /** The highest registered version of `type`. @throws ContractError `CONTRACT_UNKNOWN` */
  latestVersion(type: string): number;
  /** Validates event data against `type@version`. @throws ContractError `CONTRACT_UNKNOWN` (never for invalid data) */
  validate(type: string, version: number, data: unknown): ValidationResult;
  /** Like `validate`, but throws ContractError `CONTRACT_VIOLATION` (details: type, version, violations). */
  assertValid(type: string, version: number, data: unknown): void;
}

/**
 * Builds a registry from contract documents. Every document must be a valid contract
 * (see `inspectContractDocument`), keys and `$id`s must be unique, and every schema must
 * compile; otherwise it throws ContractError `CONTRACT_INVALID_DOCUMENT` / `CONTRACT_DUPLICATE`.
 */
export function createContractRegistry(documents: Iterable<ContractDocument>): ContractRegistry {
  const compiler = createSchemaCompiler();
  const entries = new Map<string, { contract: Contract; validate: DataValidator }>();
  const sourcesById = new Map<string, string>();
  const versionsByType = new Map<string, number[]>();

  for (const document of documents) {
    const { identity, problems } = inspectContractDocument(document);
    if (!identity) {
      throw new ContractError('CONTRACT_INVALID_DOCUMENT', `${document.source}: not a valid contract: ${problems.join('; ')}`, {
        source: document.source,
        problems,
      });
    }
    const key = contractKey(identity.type, identity.version);
    const existing = entries.get(key);
    if (existing) {
      throw new ContractError('CONTRACT_DUPLICATE', `${document.source}: contract ${key} is already defined by ${existing.contract.source}`, {
        key,
        sources: [existing.contract.source, document.source],
      });
    }
    const sameId = sourcesById.get(identity.id);
    if (sameId !== undefined) {
      throw new ContractError('CONTRACT_DUPLICATE', `${document.source}: "$id" ${identity.id} is already used by ${sameId}`, {
        id: identity.id,
        sources: [sameId, document.source],
      });
    }
    const schema = structuredClone(document.schema) as Record<string, unknown>;
    let validate: DataValidator;
    try {
      validate = compiler.compile(schema);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ContractError('CONTRACT_INVALID_DOCUMENT', `${document.source}: schema does not compile: ${reason}`, { source: document.source, key }, { cause: error });
    }
    entries.set(key, { contract: Object.freeze({ ...identity, key, source: document.source, schema }), validate });
    sourcesById.set(identity.id, document.source);
    const versions = versionsByType.get(identity.type) ?? [];
    versions.push(identity.version);
    versionsByType.set(identity.type, versions);
  }

  const sorted = [...entries.values()]
    .map((entry) => entry.contract)
    .sort((a, b) => (a.type === b.type ? a.version - b.version : a.type < b.type ? -1 : 1));
  const latest = new Map([...versionsByType].map(([type, versions]) => [type, Math.max(...versions)]));

  function entry(type: string, version: number) {
    const found = entries.get(contractKey(type, version));
    if (found) return found;
    const versions = versionsByType.get(type);
    const known = versions
      ? `known versions of ${type}: ${[...versions].sort((a, b) => a - b).join(', ')}`
      : `no contract defines event type "${type}"; known types: ${[...latest.keys()].sort().join(', ') || '(none)'}`;
    throw new ContractError('CONTRACT_UNKNOWN', `unknown contract ${contractKey(type, version)} (${known})`, { type, version });
  }

  return {
    list: () => sorted,
    types: () => [...latest.keys()].sort(),
    has: (type, version) => entries.has(contractKey(type, version)),
    get: (type, version) => entry(type, version).contract,
    latestVersion(type) {
      const version = latest.get(type);
      if (version === undefined) {
        throw new ContractError('CONTRACT_UNKNOWN', `unknown event type "${type}"; known types: ${[...latest.keys()].sort().join(', ') || '(none)'}`, { type });
      }
      return version;
    },
    validate: (type, version, data) => entry(type, version).validate(data),
    assertValid(type, version, data) {
      const result = entry(type, version).validate(data);
      if (!result.ok) throw contractViolationError(type, version, result.violations);
    },
  };
}

/** ContractError `CONTRACT_VIOLATION` with one line per violation in the message. */
export function contractViolationError(type: string, version: number, violations: readonly ContractViolation[]): ContractError {
  const lines = violations.map((v) => `  ${v.path || '(root)'}: ${v.message} [${v.keyword}]`).join('\n');
  return new ContractError('CONTRACT_VIOLATION', `event data does not satisfy contract ${contractKey(type, version)}:\n${lines}`, {
    type,
    version,
    violations,
  });
}
