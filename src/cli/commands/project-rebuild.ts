// `event-assembler project rebuild`: builds generation N+1 of one configured projection beside the
// serving N (rebuildProjection: load to the freshness point, validate with the configuration's
// `rebuild.<name>.validate`, switch readers' views in one transaction). Progress goes to the log
// (stderr), the outcome to stdout — a few lines for people, one JSON document with --json.
import { Option, type Command } from 'commander';
import { listGenerations, ProjectionConfigError, rebuildProjection, type AllPosition, type RebuildProgress, type RebuildResult, type ResolvedProjectionConfig } from '../../consumer/index.js';
import { EventAssemblerError } from '../../errors.js';
import type { Logger } from '../../pipeline/index.js';
import { onStopSignals } from '../stop-signals.js';
import { configOption, exitSoon, PROJECT_EXIT_CODES, projectionCommandOrExit, subcommandFlags } from './project-options.js';

interface RebuildFlags {
  projection?: string;
  to?: string;
  progressEvery?: string;
  json?: boolean;
}

/** A progress line at most this often while loading, unless --progress-every says otherwise. */
const DEFAULT_PROGRESS_SECONDS = 5;

const HELP = `
Builds generation N+1 of the projection beside the one serving (N keeps serving and may keep
running): creates schema <name>_g<N+1>, runs the projection's setup in it, reads the
projection's events of $all from the start up to the freshness point and applies them (as
the runner does: batches, receipts, guards, onError), validates, then switches the readers'
views in schema <name> to it in one transaction. N stays as standby, for project rollback.

The freshness point (--to) is by default the last event of $all when the rebuild starts; a
position <commit>/<prepare> is written as project status and project generations show it.

Validation comes from the configuration module, per projection (docs/consumers.md):
  export default defineProjectionConfig({
    postgres: 'env:PROJECTION_DATABASE_URL',
    kurrentdb: 'env:KURRENTDB_URL',
    projections: [outstanding],
    rebuild: {
      outstanding: {
        validate: {
          table: 'outstanding', key: 'invoice_id',   // one row per live entity: count check
          sample: 50,                               // rows compared with their source rows
          source: ({ id }) => readInvoice(id),      // the entity's source row, or null
          check: (row, source) => (row.balance === source?.balance ? undefined : 'balance differs'),
        },
      },
    },
  });
Without one, the generation is switched in once loaded (parked events are still reported).

Example:
  $ event-assembler project rebuild --config projection.config.ts --projection outstanding
  outstanding: generation 3 switched in (readers' views in schema outstanding); generation 2 kept as standby for rollback
    loaded to 9180/9180: 70 events read, 70 applied, 0 unhandled, 0 skipped, 0 parked
    validated: 6 rows for 6 live entities, 6 sampled rows agree with their source
    next: restart event-assembler project so that it keeps generation 3 current

Progress goes to the log (stderr): "rebuild started", "rebuild loading" with the events read
so far (at most every --progress-every seconds, default ${DEFAULT_PROGRESS_SECONDS}), "rebuild loaded", "rebuild switching
readers", "rebuild switched readers". The outcome goes to stdout; --json prints it as one
JSON document (positions as decimal strings).

On SIGTERM or SIGINT the rebuild stops: the new generation is marked failed, readers are not
switched (N keeps serving), exit 1. A second signal exits at once (130/143); the next rebuild
marks the generation left building as failed.

A failed rebuild keeps the new generation's schema for inspection (drop it by hand); its row
in project generations says why it failed.

Exit codes:
  0  switched in: readers see the new generation
  1  not switched in: validation failed (the message names the check, the entity and what
     differed), a handler failed with onError 'halt', another rebuild of the projection runs,
     a signal stopped it, or PostgreSQL / KurrentDB failed — generation N keeps serving
  2  the configuration could not be loaded or is invalid, no projection of that name, or a
     bad --to
`;

/** `head` or `<commit>/<prepare>`; null when it is neither. */
export function parseFreshnessPoint(text: string): 'head' | AllPosition | null {
  if (text === 'head') return 'head';
  const match = /^(\d+)\/(\d+)$/.exec(text);
  return match ? { commit: BigInt(match[1]!), prepare: BigInt(match[2]!) } : null;
}

const positionText = (p: AllPosition | null) => (p === null ? '- ($all was empty)' : `${p.commit}/${p.prepare}`);
const positionJson = (p: AllPosition | null) => (p === null ? null : { commit: p.commit.toString(), prepare: p.prepare.toString() });
const json = (value: unknown) => JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2);

/** For people: what serves now, what was loaded, what was validated, what to do next. */
export function rebuildText(result: RebuildResult): string {
  const { events: e, validation: v } = result;
  const kept = result.previous === null ? 'no generation served before' : `generation ${result.previous} kept as standby for rollback`;
  const validated =
    v === null
      ? `not validated (no rebuild.${result.projection}.validate in the configuration)`
      : `validated: ${v.rows} rows for ${v.entities} live entities, ${v.sampled === 0 ? 'no rows sampled' : `${v.sampled} sampled rows agree with their source`}`;
  return [
    `${result.projection}: generation ${result.generation} switched in (readers' views in schema ${result.readerSchema}); ${kept}`,
    `  loaded to ${positionText(result.position)}: ${e.read} events read, ${e.applied} applied, ${e.unhandled} unhandled, ${e.skipped} skipped, ${e.parked} parked`,
    `  ${validated}`,
    `  next: restart event-assembler project so that it keeps generation ${result.generation} current`,
  ].join('\n');
}

/** What a failed rebuild left: the generation it registered (and its state now) and the one serving. */
interface Failure {
  readonly projection: string;
  readonly outcome: 'failed' | 'stopped';
  readonly generation: number | null;
  readonly generationState: string | null;
  readonly serving: number | null | 'unknown';
  readonly error: { readonly code: string | null; readonly message: string; readonly details?: unknown };
}

function failureText(f: Failure): string {
  const serving = f.serving === 'unknown' ? 'the serving generation could not be read' : f.serving === null ? 'no generation serves yet' : `generation ${f.serving} keeps serving`;
  const head = f.outcome === 'stopped' ? 'rebuild stopped by a signal' : 'rebuild failed';
  const left =
    f.generation === null
      ? 'no generation was registered'
      : `generation ${f.generation} not switched in: ${f.generationState ?? 'state unknown'}${f.generationState === 'failed' ? `, schema ${f.projection}_g${f.generation} kept for inspection (drop it by hand)` : ''}`;
  return [`${f.projection}: ${head}, readers unchanged — ${serving}`, `  ${left}`, `  why: ${f.error.message}`].join('\n');
}

async function failureOf(config: ResolvedProjectionConfig, projection: string, generation: number | null, error: unknown, stopped: boolean): Promise<Failure> {
  const generations = await listGenerations({ postgres: config.postgres, stateSchema: config.stateSchema, projection }).catch(() => null);
  const message = config.redactor.text(error instanceof Error ? error.message : String(error));
  return {
    projection,
    outcome: stopped ? 'stopped' : 'failed',
    generation,
    generationState: generations?.find((g) => g.generation === generation)?.state ?? null,
    serving: generations === null ? 'unknown' : (generations.find((g) => g.state === 'serving')?.generation ?? null),
    error: error instanceof EventAssemblerError ? { code: error.code, message, details: error.details } : { code: null, message },
  };
}

/** Logs loading progress at most every `everyMs`, and each phase as it starts; remembers the generation. */
function progressReporter(logger: Logger, everyMs: number): { onProgress: (p: RebuildProgress) => void; generation: () => number | null } {
  const started = Date.now();
  let last = started;
  let generation: number | null = null;
  return {
    generation: () => generation,
    onProgress(p) {
      generation = p.generation;
      const fields = { projection: p.projection, generation: p.generation, read: p.read, position: p.position, to: p.to, elapsedMs: Date.now() - started };
      if (p.phase === 'validating') logger.info('rebuild loaded', fields);
      else if (p.phase === 'switching') logger.info('rebuild switching readers', fields);
      else if (p.read > 0 && Date.now() - last >= everyMs) {
        last = Date.now();
        logger.info('rebuild loading', fields);
      }
    },
  };
}

async function rebuild(flags: RebuildFlags & { config: string; logFormat: 'json' | 'pretty' }, command: Command): Promise<void> {
  if (typeof flags.projection !== 'string') command.error("error: required option '--projection <name>' not specified", { exitCode: PROJECT_EXIT_CODES.config });
  const to = parseFreshnessPoint(flags.to ?? 'head');
  if (to === null) command.error(`error: --to must be head or <commit>/<prepare> (a $all position, e.g. 9180/9180), not "${flags.to}"`, { exitCode: PROJECT_EXIT_CODES.config });
  const progressEvery = Number(flags.progressEvery ?? DEFAULT_PROGRESS_SECONDS);
  if (!/^\d+(\.\d+)?$/.test(flags.progressEvery ?? '0')) command.error(`error: --progress-every must be a number of seconds ≥ 0, not "${flags.progressEvery}"`, { exitCode: PROJECT_EXIT_CODES.config });
  const started = await projectionCommandOrExit(flags, flags.projection!);
  if (started === null) return;
  const { config, logger, projection } = started;
  const abort = new AbortController();
  const offSignals = onStopSignals(logger, (signal) => abort.abort(new Error(`stopped by ${signal} before readers were switched`)), 'second signal: exiting at once; the generation left building is marked failed by the next rebuild');
  const progress = progressReporter(logger, progressEvery * 1000);
  const validate = Object.hasOwn(config.rebuild, projection.name) ? config.rebuild[projection.name]!.validate : undefined;
  try {
    const result = await rebuildProjection({
      projection,
      postgres: config.postgres,
      kurrentdb: config.kurrentdb,
      stateSchema: config.stateSchema,
      to: to!,
      ...(validate ? { validate } : {}),
      ...(config.contracts ? { contracts: config.contracts } : {}),
      signal: abort.signal,
      logger,
      onProgress: progress.onProgress,
    });
    const out = flags.json ? json({ outcome: 'switched', ...result, position: positionJson(result.position) }) : rebuildText(result);
    process.stdout.write(`${out}\n`);
    process.exitCode = PROJECT_EXIT_CODES.stopped;
  } catch (error) {
    const failure = await failureOf(config, projection.name, progress.generation(), error, abort.signal.aborted);
    process.stdout.write(`${flags.json ? json(failure) : failureText(failure)}\n`);
    process.exitCode = error instanceof ProjectionConfigError ? PROJECT_EXIT_CODES.config : PROJECT_EXIT_CODES.fatal;
  } finally {
    offSignals();
    exitSoon();
  }
}

export function register(project: Command): void {
  project
    .command('rebuild')
    .summary('build a new generation of a projection beside the serving one, validate it, switch readers to it')
    .description(
      "Rebuilds one projection of the configuration module from $all into generation N+1 while N keeps serving, validates it (the configuration's rebuild.<name>.validate) and switches readers' views to it in one transaction.",
    )
    .addOption(configOption())
    .addOption(new Option('--projection <name>', 'the projection to rebuild (its name in the configuration)'))
    .addOption(new Option('--to <point>', 'the freshness point: head, or a $all position <commit>/<prepare>').default('head'))
    .addOption(new Option('--progress-every <seconds>', 'a "rebuild loading" log line at most this often').default(String(DEFAULT_PROGRESS_SECONDS)))
    .option('--json', 'print the outcome as one JSON document')
    .addHelpText('after', HELP)
    .action((_flags: unknown, self: Command) => rebuild(subcommandFlags<RebuildFlags>(self), self));
}
