// The configuration of `event-assembler project` (and `project rebuild`): a module default-exporting
// `defineProjectionConfig({ postgres, kurrentdb, projections, rebuild?, … })`, parsed once at start-up with
// zod and the assembler's conventions (secrets as `env:VARIABLE`, every problem reported at once
// with its field and fix — `src/config/`).
import { dirname } from 'node:path';
import { z } from 'zod';
import { add, contractsDir, member, reported, resolveSecret, zodProblem, type Findings } from '../config/checks.js';
import { ConfigError } from '../config/config-error.js';
import { importConfigModule } from '../config/load.js';
import { createRedactor } from '../config/redact.js';
import type { Upcaster } from '../contracts/upcasters.js';
import { DEFAULT_STATE_SCHEMA } from './store.js';
import { partitionKey } from './partition.js';
import { validationProblems } from './rebuild-validate.js';
import type { Projection, ProjectionConfig, RebuildValidation, ResolvedProjectionConfig } from './types.js';

/** How to fix a field, by its path without list indexes (the zod message says what is wrong). */
const FIXES: Record<string, string> = {
  postgres: 'set postgres to env:VARIABLE (a postgres:// URL of the projections\' database in that environment variable)',
  kurrentdb: 'set kurrentdb to env:VARIABLE holding e.g. kurrentdb://host:2113?tls=false',
  projections: 'import your projections (each made with defineProjection) and pass them as projections: [...]',
  contracts: 'leave contracts out, or give { dir, upcasters? }',
  'contracts.dir': 'set contracts.dir to the directory of your JSON Schema contracts, e.g. contracts/invoicing',
  'contracts.upcasters': 'pass the upcasters made with defineUpcaster, or leave upcasters out',
  stateSchema: 'use a plain PostgreSQL identifier, or leave it out (default event_assembler)',
  schema: 'use a plain PostgreSQL identifier, or leave it out (default public)',
  rebuild: 'give rebuild: { <projection name>: { validate: { table, key?, entityType?, sample?, source?, check? } } }, or leave it out',
  'rebuild.*': 'give { validate: { table, key?, entityType?, sample?, source?, check? } }, or leave the projection out of rebuild',
  'rebuild.*.validate': 'give validate: { table, key?, entityType?, sample?, source?, check? } (docs/consumers.md, "Generations and rebuilds"), or leave it out',
  'rebuild.*.validate.table': "set table to the projection's table holding one row per live entity, e.g. table: 'accounts'",
  'rebuild.*.validate.key': 'set key to the column of table holding the entity id, or leave it out (default id)',
  'rebuild.*.validate.entityType': 'set entityType to an entity type the events carry (entity.type), or leave it out (every type)',
  'rebuild.*.validate.sample': 'use an integer ≥ 1 together with source and check, or leave it out (20 when check is given)',
  'rebuild.*.validate.source': "give source: (entity) => the entity's source row or null, together with check",
  'rebuild.*.validate.check': 'give check: (row, source, entity) => what differs (a string) or nothing, together with source',
};

function fixFor(field: string): string {
  for (let path = field; path; path = path.includes('.') ? path.slice(0, path.lastIndexOf('.')) : '') {
    const fix = FIXES[path.replace(/\.\d+(?=\.|$)/g, '').replace(/^rebuild\.[^.]+/, 'rebuild.*')];
    if (fix) return fix;
  }
  return 'see the field\'s documentation in ProjectionConfig';
}

const secret = z.union([z.string().min(1), z.custom<() => string | undefined>((v) => typeof v === 'function', 'must be a string or a function returning one')]);
const identifier = z.string().regex(/^[A-Za-z_][A-Za-z0-9_$]{0,62}$/, 'must be a plain PostgreSQL identifier (letters, digits, _ and $; at most 63)');
const projectionSchema = z.custom<Projection<any>>(
  (v) => v !== null && typeof v === 'object' && typeof (v as Projection).name === 'string' && (v as Projection).deletes instanceof Set,
  'must be a projection made by defineProjection({ name, from, handlers })',
);

const fn = z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', 'must be a function');
const validateSchema = z
  .object({
    table: z.string().min(1, 'must name the table holding one row per live entity'),
    key: z.string().min(1, 'must name the column holding the entity id').optional(),
    entityType: z.string().min(1, 'must name an entity type').optional(),
    sample: z.number().int('must be an integer').min(1, 'must be at least 1').optional(),
    source: fn.optional(),
    check: fn.optional(),
  })
  .strict();

const configSchema = z
  .object({
    postgres: secret,
    kurrentdb: secret,
    projections: z.array(projectionSchema).min(1, 'list at least one projection'),
    contracts: z
      .object({ dir: z.string().min(1), upcasters: z.array(z.custom((v) => v !== null && typeof v === 'object', 'must be an upcaster made by defineUpcaster')).optional() })
      .strict()
      .optional(),
    stateSchema: identifier.default(DEFAULT_STATE_SCHEMA),
    schema: identifier.default('public'),
    rebuild: z.record(z.string(), z.object({ validate: validateSchema.optional() }).strict()).optional(),
  })
  .strict();

/** Only types the configuration (so an editor can complete it); validation happens in `parseProjectionConfig`. */
export function defineProjectionConfig<const C extends ProjectionConfig>(config: C): C {
  return config;
}

/** Two runners of one projection on one partition would conflict on its checkpoint: each (name, partition) once. */
function checkDuplicates(projections: unknown, findings: Findings): void {
  if (!Array.isArray(projections)) return;
  const seen = new Set<string>();
  projections.forEach((p: Projection<any>, i) => {
    if (!(p?.deletes instanceof Set)) return; // not a projection: reported by the schema
    const key = `${p.name} ${partitionKey(p.partition)}`;
    if (seen.has(key)) add(findings, `projections.${i}`, `projection "${p.name}" partition ${partitionKey(p.partition)} is listed twice`, 'list each projection (and partition) once');
    seen.add(key);
  });
}

/** Each `rebuild` entry names a configured projection; its `validate` holds together (what the schema cannot say: sample needs check, source and check go in pairs). */
function checkRebuild(given: Record<string, unknown>, findings: Findings): void {
  const rebuild = given['rebuild'];
  if (rebuild === null || typeof rebuild !== 'object' || findings.reported.includes('rebuild')) return;
  const projections = Array.isArray(given['projections']) ? (given['projections'] as unknown[]) : null;
  const names = projections?.filter((p): p is Projection<any> => (p as Projection | null)?.deletes instanceof Set).map((p) => p.name) ?? null;
  for (const [name, entry] of Object.entries(rebuild)) {
    const field = `rebuild.${name}`;
    if (names !== null && !reported(findings, 'projections') && !names.includes(name)) {
      add(findings, field, `names no projection of projections (${[...new Set(names)].join(', ') || 'none'})`, `use the name of a projection listed in projections, or remove rebuild.${name}`);
    }
    if (findings.reported.includes(field) || reported(findings, `${field}.validate`)) continue;
    for (const problem of validationProblems(member(entry, 'validate') as RebuildValidation | undefined)) {
      const at = problem.field ? `${field}.validate.${problem.field}` : `${field}.validate`;
      add(findings, at, problem.problem, fixFor(at));
    }
  }
}

export interface ParseProjectionConfigOptions {
  /** Extra directory to resolve a relative `contracts.dir` against (the config file's). Default: none. */
  readonly baseDir?: string;
}

/**
 * Validates, resolves secrets, applies defaults. Throws one `ConfigError` listing every problem
 * found (field, problem, fix).
 */
export function parseProjectionConfig(config: ProjectionConfig, options: ParseProjectionConfigOptions = {}): ResolvedProjectionConfig {
  if (config === null || typeof config !== 'object') {
    throw new ConfigError('(config)', `expected an object, got ${config === null ? 'null' : typeof config}`, 'export default defineProjectionConfig({ postgres, kurrentdb, projections })');
  }
  const findings: Findings = { problems: [], reported: [] };
  const parsed = configSchema.safeParse(config);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const problem = zodProblem(config, issue);
      // zod's fix names the assembler's fields; an unknown field's ("remove it") holds for both.
      const fix = problem.problem.startsWith('unknown field') ? problem.fix : fixFor(problem.field);
      const secretField = (problem.field === 'postgres' || problem.field === 'kurrentdb') && issue.code === 'invalid_union';
      findings.problems.push({ ...problem, ...(secretField ? { problem: 'must be a connection string, env:VARIABLE or a function returning one' } : {}), fix });
      findings.reported.push(problem.field);
    }
  }
  const given = config as unknown as Record<string, unknown>;
  checkDuplicates(given['projections'], findings);
  checkRebuild(given, findings);
  const postgres = resolveSecret(given['postgres'], 'postgres', findings);
  const kurrentdb = resolveSecret(given['kurrentdb'], 'kurrentdb', findings);
  const contracts = member(given, 'contracts');
  const dir = contracts === undefined ? undefined : contractsDir(member(contracts, 'dir'), options, findings);
  if (!parsed.success || findings.problems.length > 0 || postgres === null || kurrentdb === null || dir === null) throw ConfigError.of(findings.problems);
  const c = parsed.data;
  return {
    postgres,
    kurrentdb,
    projections: c.projections,
    contracts: dir === undefined ? null : { dir, upcasters: (c.contracts?.upcasters ?? []) as readonly Upcaster[] },
    stateSchema: c.stateSchema,
    schema: c.schema,
    // As given (zod's copy would do as well): the user's source and check functions are kept as they are.
    rebuild: (given['rebuild'] as ResolvedProjectionConfig['rebuild'] | undefined) ?? {},
    redactor: createRedactor([postgres, kurrentdb]),
  };
}

/** Imports a projection configuration module (`.ts`, `.mts`, `.js`, `.mjs`) and parses it. Throws `ConfigLoadError` or `ConfigError`. */
export async function loadProjectionConfig(file: string): Promise<ResolvedProjectionConfig> {
  const { file: path, config } = await importConfigModule(file);
  return parseProjectionConfig(config as unknown as ProjectionConfig, { baseDir: dirname(path) });
}
