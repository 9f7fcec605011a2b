// What makes a JSON Schema document a contract: its identity (`x-event-type`, `x-event-version`,
// `$id`) and the file-name convention `<Type>.v<N>.schema.json`. Pure: no I/O.

/** The JSON Schema dialect every contract declares in `$schema`. */
export const CONTRACT_DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** `<Type>.v<N>.schema.json`: Type is PascalCase ASCII, N a positive integer without leading zeros. */
export const CONTRACT_FILE_NAME = /^([A-Z][A-Za-z0-9]*)\.v([1-9][0-9]*)\.schema\.json$/;

const EVENT_TYPE = /^[A-Z][A-Za-z0-9]*$/;

/** A schema document as loaded, before it is known to be a valid contract. */
export interface ContractDocument {
  /** Where it came from, for messages: a file path such as `contracts/invoicing/InvoiceIssued.v2.schema.json`, or any label. */
  readonly source: string;
  /** The parsed JSON Schema. */
  readonly schema: unknown;
}

/** The identity of a contract: event type, version and the schema's `$id`. */
export interface ContractIdentity {
  readonly type: string;
  readonly version: number;
  readonly id: string;
}

/** `type@version`, the registry key, e.g. `InvoiceIssued@2`. */
export function contractKey(type: string, version: number): string {
  return `${type}@${version}`;
}

/** Type and version encoded in a file name (`InvoiceIssued.v2.schema.json`), or undefined if it does not follow the convention. */
export function parseContractFileName(path: string): { type: string; version: number } | undefined {
  const base = path.slice(Math.max(path.lastIndexOf('/'), path.lastIndexOf('\\')) + 1);
  const match = CONTRACT_FILE_NAME.exec(base);
  if (!match) return undefined;
  return { type: match[1]!, version: Number(match[2]) };
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Checks the envelope of a contract document and returns its identity plus every problem found.
 *
 * The identity is declared IN the document (`x-event-type`, `x-event-version`) rather than only
 * derived from the file name, so a schema keeps its identity when it is copied, bundled or served;
 * when `source` follows the file-name convention, the two must agree.
 */
export function inspectContractDocument(document: ContractDocument): { identity?: ContractIdentity; problems: string[] } {
  const problems: string[] = [];
  const schema = document.schema;
  if (!isPlainObject(schema)) return { problems: ['the document is not a JSON object'] };

  if (schema.$schema !== CONTRACT_DIALECT) {
    problems.push(`"$schema" must be "${CONTRACT_DIALECT}" (found ${JSON.stringify(schema.$schema)})`);
  }
  const id = schema.$id;
  if (typeof id !== 'string' || !/^[A-Za-z][A-Za-z0-9+.-]*:\S+$/.test(id)) {
    problems.push(`"$id" must be an absolute URI, e.g. "urn:event-assembler:contract:<domain>:<Type>:v<N>" (found ${JSON.stringify(id)})`);
  }
  if (typeof schema.title !== 'string' || schema.title.trim() === '') problems.push('"title" must be a non-empty string');
  const type = schema['x-event-type'];
  if (typeof type !== 'string' || !EVENT_TYPE.test(type)) {
    problems.push(`"x-event-type" must be a PascalCase event type name (found ${JSON.stringify(type)})`);
  }
  const version = schema['x-event-version'];
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) {
    problems.push(`"x-event-version" must be a positive integer (found ${JSON.stringify(version)})`);
  }
  if (schema.type !== 'object') problems.push('the root schema must have "type": "object" (event data is a JSON object)');

  const fromName = parseContractFileName(document.source);
  if (fromName && typeof type === 'string' && fromName.type !== type) {
    problems.push(`"x-event-type" is ${JSON.stringify(type)} but the file name says ${JSON.stringify(fromName.type)}`);
  }
  if (fromName && typeof version === 'number' && fromName.version !== version) {
    problems.push(`"x-event-version" is ${version} but the file name says ${fromName.version}`);
  }

  if (problems.length > 0) return { problems };
  return { identity: { type: type as string, version: version as number, id: id as string }, problems };
}
