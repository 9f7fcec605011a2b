// `event-assembler project generations`: each configured projection's generations — which serves,
// which a rollback would serve, which failed and why. Reads only (listGenerations).
import { Option, type Command } from 'commander';
import pg from 'pg';
import { listGenerations, type AllPosition, type GenerationInfo, type ResolvedProjectionConfig } from '../../consumer/index.js';
import { createLogger } from '../../pipeline/index.js';
import { configOption, configOrExit, PROJECT_EXIT_CODES, projectionOrExit, redacting, subcommandFlags } from './project-options.js';

interface GenerationsFlags {
  projection?: string;
  json?: boolean;
}

const HELP = `
For each projection of the configuration (or the one named by --projection), its generations
(made by project rebuild), oldest first:
  GEN        the generation: tables in schema <name>_g<N>
  STATE      serving (readers' views point at it), standby (served before, kept for
             rollback), building (a rebuild loads it), failed (see FAILURE)
  PREVIOUS   the generation that served before it was switched in: what rollback returns to
  LOADED TO  its freshness point (the $all position it was loaded to)
  SWITCHED   when it last became the serving generation
and one line per projection: which generation serves and which project rollback would serve.
Reads only; creates nothing.

Example:
  $ event-assembler project generations --config projection.config.ts
  PROJECTION  GEN  STATE    PREVIOUS  LOADED TO  CREATED                   SWITCHED                  FAILURE
  accounts    1    standby  -         7486/7486  2026-12-02T00:57:18.246Z  2026-12-02T00:57:18.301Z  -
  accounts    2    serving  1         9180/9180  2026-12-02T01:03:40.112Z  2026-12-02T01:03:40.190Z  -

  accounts: generation 2 serves; project rollback would serve generation 1

Exit codes: 0 shown, 1 PostgreSQL could not be read, 2 configuration invalid or no projection
of that name.
`;

export interface ProjectionGenerations {
  readonly projection: string;
  readonly serving: number | null;
  /** What `project rollback` without --to would serve (`null`: nothing). */
  readonly rollbackTo: number | null;
  readonly generations: readonly GenerationInfo[];
}

function rollbackTarget(generations: readonly GenerationInfo[]): number | null {
  const previous = generations.find((g) => g.state === 'serving')?.previous ?? null;
  return generations.find((g) => g.generation === previous && g.state === 'standby')?.generation ?? null;
}

async function readAll(config: ResolvedProjectionConfig, names: readonly string[]): Promise<ProjectionGenerations[]> {
  const pool = new pg.Pool({ connectionString: config.postgres, max: 1 });
  try {
    const out: ProjectionGenerations[] = [];
    for (const projection of names) {
      const generations = await listGenerations({ postgres: pool, stateSchema: config.stateSchema, projection });
      out.push({ projection, serving: generations.find((g) => g.state === 'serving')?.generation ?? null, rollbackTo: rollbackTarget(generations), generations });
    }
    return out;
  } finally {
    await pool.end();
  }
}

const positionText = (p: AllPosition | null) => (p === null ? '-' : `${p.commit}/${p.prepare}`);

/** One line per projection: what serves, what a rollback would serve. */
function summaryLine(p: ProjectionGenerations, schema: string): string {
  if (p.generations.length === 0) return `${p.projection}: no generations (project runs it in schema ${schema})`;
  if (p.serving === null) return `${p.projection}: no generation serves yet (project runs it in schema ${schema})`;
  const standby = p.generations.filter((g) => g.state === 'standby' && g.generation !== p.rollbackTo).map((g) => g.generation);
  const others = standby.length > 0 ? `; standby, with rollback --to: ${standby.join(', ')}` : '';
  const rollback = p.rollbackTo === null ? 'project rollback has nothing to return to without --to' : `project rollback would serve generation ${p.rollbackTo}`;
  return `${p.projection}: generation ${p.serving} serves; ${rollback}${others}`;
}

export function generationsTable(report: readonly ProjectionGenerations[], schema: string): string {
  const header = ['PROJECTION', 'GEN', 'STATE', 'PREVIOUS', 'LOADED TO', 'CREATED', 'SWITCHED', 'FAILURE'];
  const rows = report.flatMap((p) =>
    p.generations.map((g) => [p.projection, String(g.generation), g.state, g.previous === null ? '-' : String(g.previous), positionText(g.position), g.createdAt.toISOString(), g.switchedAt?.toISOString() ?? '-', g.failure ?? '-']),
  );
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [...(rows.length > 0 ? [line(header), ...rows.map(line), ''] : []), ...report.map((p) => summaryLine(p, schema))].join('\n');
}

/** For machines: positions as decimal strings (they exceed 2^53). */
export function generationsJson(report: readonly ProjectionGenerations[]): string {
  const position = (p: AllPosition | null) => (p === null ? null : { commit: p.commit.toString(), prepare: p.prepare.toString() });
  return JSON.stringify({ projections: report.map((p) => ({ ...p, generations: p.generations.map((g) => ({ ...g, position: position(g.position) })) })) }, null, 2);
}

async function generations(flags: GenerationsFlags & { config: string; logFormat: 'json' | 'pretty' }): Promise<void> {
  const base = createLogger({ format: flags.logFormat });
  const config = await configOrExit(flags.config, base);
  if (config === null) return;
  const logger = redacting(base, config);
  if (flags.projection !== undefined && projectionOrExit(config, flags.projection, logger) === null) return;
  const names = flags.projection !== undefined ? [flags.projection] : [...new Set(config.projections.map((p) => p.name))];
  try {
    const report = await readAll(config, names);
    process.stdout.write(`${flags.json ? generationsJson(report) : generationsTable(report, config.schema)}\n`);
  } catch (error) {
    logger.error("could not read the projections' generations", { error });
    process.exitCode = PROJECT_EXIT_CODES.fatal;
  }
}

export function register(project: Command): void {
  project
    .command('generations')
    .summary('each projection\'s generations: which serves, which rollback would serve, which failed')
    .description('Lists the generations of the projections of a configuration module. Human table by default, --json for machines.')
    .addOption(configOption())
    .addOption(new Option('--projection <name>', 'only this projection'))
    .option('--json', 'print one JSON document instead of a table')
    .addHelpText('after', HELP)
    .action((_flags: unknown, self: Command) => generations(subcommandFlags<GenerationsFlags>(self)));
}
