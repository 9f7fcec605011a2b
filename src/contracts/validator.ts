// The JSON Schema validator behind the registry: ajv (draft 2020-12) with ajv-formats.
// Chosen over zod 4's `z.fromJSONSchema` by correctness and speed — see
// bench/validators.bench.ts and bench/results/validators.md. Pure: compiles in memory.
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats.js';

// ajv-formats is CommonJS whose module.exports IS the plugin; under NodeNext the default
// import is typed as the module namespace, so pick the callable either way.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => Ajv2020;

/** One reason why event data does not satisfy its contract. */
export interface ContractViolation {
  /** JSON pointer into the event data (`''` is the whole object); for a missing or extra property, the pointer of that property. */
  readonly path: string;
  readonly message: string;
  /** The JSON Schema keyword that failed: `required`, `type`, `pattern`, `format`, `additionalProperties`, … */
  readonly keyword: string;
}

export type ValidationResult = { readonly ok: true } | { readonly ok: false; readonly violations: readonly ContractViolation[] };

/** A compiled contract schema. */
export type DataValidator = (data: unknown) => ValidationResult;

/** Annotation keywords of contract documents that ajv's strict mode must accept. */
export const CONTRACT_KEYWORDS = ['x-event-type', 'x-event-version'] as const;

/**
 * A compiler of contract schemas. One instance holds the schemas it compiled by `$id`, so a
 * second schema with the same `$id` is refused — compile each contract once.
 */
export function createSchemaCompiler(): { compile(schema: object): DataValidator } {
  const ajv = new Ajv2020({
    // Report every violation, not just the first: a mapper author fixes them all in one go.
    allErrors: true,
    // Strict mode turns typos (`"requried"`, `"maxlength"`) and ambiguous schemas into compile errors.
    strict: true,
    allowUnionTypes: true,
    // Formats are assertions in contracts (date-time, date, uuid, …), not just annotations.
    validateFormats: true,
  });
  addFormats(ajv);
  ajv.addFormat('date-time', { type: 'string', validate: isRfc3339DateTime });
  ajv.addVocabulary([...CONTRACT_KEYWORDS]);
  return {
    compile(schema) {
      const validate = ajv.compile(schema);
      return (data) => (validate(data) ? OK : { ok: false, violations: toViolations(validate) });
    },
  };
}

/**
 * ajv-formats' `date-time` also accepts a space for `T` and offsets without a colon or minutes
 * (`+0200`, `+02` — PostgreSQL's text output of timestamptz). RFC 3339 §5.6, which JSON Schema
 * names, allows neither; consumers' strict parsers reject them. So the shape is checked here and
 * the ranges (month, day, leap second) by ajv-formats.
 */
const RFC3339_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/i;
const fullDateTime = fullFormats['date-time'] as { validate: (value: string) => boolean };

function isRfc3339DateTime(value: string): boolean {
  return RFC3339_DATE_TIME.test(value) && fullDateTime.validate(value);
}

const OK: ValidationResult = Object.freeze({ ok: true });

function toViolations(validate: ValidateFunction): ContractViolation[] {
  return (validate.errors ?? []).map(toViolation);
}

function toViolation(error: ErrorObject): ContractViolation {
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'required' && typeof params.missingProperty === 'string') {
    return { path: `${error.instancePath}/${escapePointer(params.missingProperty)}`, message: 'is required', keyword: 'required' };
  }
  if (error.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') {
    return {
      path: `${error.instancePath}/${escapePointer(params.additionalProperty)}`,
      message: 'is not a property of this contract (additionalProperties: false)',
      keyword: 'additionalProperties',
    };
  }
  return { path: error.instancePath, message: error.message ?? `fails "${error.keyword}"`, keyword: error.keyword };
}

/** RFC 6901: `~` → `~0`, `/` → `~1`. */
export function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}
