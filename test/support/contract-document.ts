// A v1 event contract as a test writes it into a contracts directory: the JSON Schema 2020-12
// header every contract file carries (docs/contracts.md), with the test's own fields.

export interface ContractDocumentOptions {
  /** The `$id`'s domain part: `urn:event-assembler:contract:<domain>:<type>:v1`. */
  readonly domain: string;
  readonly type: string;
  readonly description: string;
  readonly required: readonly string[];
  readonly properties: Readonly<Record<string, object>>;
}

export function contractDocument(o: ContractDocumentOptions): object {
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: `urn:event-assembler:contract:${o.domain}:${o.type}:v1`,
    title: `${o.type} v1`,
    description: o.description,
    'x-event-type': o.type,
    'x-event-version': 1,
    type: 'object',
    additionalProperties: false,
    required: o.required,
    properties: o.properties,
  };
}
