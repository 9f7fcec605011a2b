// The configuration of `event-assembler project`: a module default-exporting
// `defineProjectionConfig({ postgres, kurrentdb, projections, … })`, parsed once at start-up with
// zod and the assembler's conventions (secrets as `env:VARIABLE`, every problem reported at once
// with its field and fix — `src/config/`).
import { dirname } from 'node:path';
import { z } from 'zod';
import { add, contractsDir, member, resolveSecret, zodProblem, type Findings } from '../config/checks.js';
import { ConfigError } from '../config/config-error.js';
import { importConfigModule } from '../config/load.js';
import { createRedactor } from '../config/redact.js';
import type { Upcaster } from '../contracts/upcasters.js';
import { DEFAULT_STATE_SCHEMA } from './store.js';
import { partitionKey } from './partition.js';
import type { Projection, ProjectionConfig, ResolvedProjectionConfig } from './types.js';

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
};

function fixFor(field: string): string {
  for (let path = field; path; path = path.includes('.') ? path.slice(0, path.lastIndexOf('.')) : '') {
    const fix = FIXES[path.replace(/\.\d+(?=\.|$)/g, '')];
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
    redactor: createRedactor([postgres, kurrentdb]),
  };
}

/** Imports a projection configuration module (`.ts`, `.mts`, `.js`, `.mjs`) and parses it. Throws `ConfigLoadError` or `ConfigError`. */
export async function loadProjectionConfig(file: string): Promise<ResolvedProjectionConfig> {
  const { file: path, config } = await importConfigModule(file);
  return parseProjectionConfig(config as unknown as ProjectionConfig, { baseDir: dirname(path) });
}
