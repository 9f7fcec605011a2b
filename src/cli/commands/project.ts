// `event-assembler project`: runs the projections of a configuration module (one runner each)
// until SIGTERM/SIGINT; `project status` shows where each stands (project-status.ts); rebuild,
// rollback and generations each in project-<subcommand>.ts; shared options in project-options.ts.
import type { Command } from 'commander';
import { createProjectionRunner, type ProjectionRunner } from '../../consumer/index.js';
import { EventAssemblerError } from '../../errors.js';
import { onStopSignals } from '../stop-signals.js';
import { createLogger, type Logger } from '../../pipeline/index.js';
import { register as registerGenerations } from './project-generations.js';
import { configOption, configOrExit, exitSoon, logFormatOption, PROJECT_EXIT_CODES, redacting, withConfig, type ProjectFlags } from './project-options.js';
import { register as registerRebuild } from './project-rebuild.js';
import { register as registerRollback } from './project-rollback.js';
import { LAG_CAP, projectStatus, statusJson, statusTable } from './project-status.js';
import { registerParked } from './project-parked.js';

const HELP = `
The configuration module (.ts, .mts, .js or .mjs; TypeScript needs no build step)
default-exports defineProjectionConfig({...}):
  postgres      the database of the projections' tables and the kit's state — use
                env:VARIABLE, never a literal password
  kurrentdb     the KurrentDB the assembler writes to (env:VARIABLE)
  projections   your projections (defineProjection), one runner each; a projection may be
                listed once per partition (partition: { count, index })
  contracts     { dir, upcasters? } — validate each event against its contract and upcast
                it to the newest version (default: no validation)
  stateSchema   schema of the kit's state tables (default event_assembler)
  schema        schema of the projections' own tables (default public)
  rebuild       per projection, what project rebuild checks before switching readers:
                { <name>: { validate: { table, key?, entityType?, sample?, source?, check? } } }
                (project rebuild --help)

Example (projection.config.ts):
  import { defineProjectionConfig } from 'event-assembler';
  import { outstanding } from './projections/outstanding.js';
  export default defineProjectionConfig({
    postgres: 'env:PROJECTION_DATABASE_URL',
    kurrentdb: 'env:KURRENTDB_URL',
    projections: [outstanding],
    contracts: { dir: 'contracts/invoicing' },
  });

  $ PROJECTION_DATABASE_URL=postgres://app:...@db/app \\
    KURRENTDB_URL='kurrentdb://localhost:2113?tls=false' \\
    event-assembler project --config projection.config.ts

  $ event-assembler project status --config projection.config.ts [--json]
  $ event-assembler project rebuild --config projection.config.ts --projection outstanding
  $ event-assembler project rollback --config projection.config.ts --projection outstanding
  $ event-assembler project generations --config projection.config.ts

What happens:
  Each runner creates the state tables and its projection's tables (setup), subscribes to
  $all after its checkpoint and applies events in batches: the effects, the receipts and
  the checkpoint commit in one PostgreSQL transaction, so an event is applied once even
  when it is delivered again (docs/consumers.md). One JSON log line per start, parked
  event, failure and stop.

  A projection with a serving generation (made by project rebuild) runs into it: tables in
  schema <name>_g<N>, its own checkpoint; the "projection running" line names the
  generation and schema. The generation is chosen at start: after a rebuild or rollback,
  restart project so it keeps the new serving generation current.

One instance per projection partition is active: its runner holds the partition's lease (a
PostgreSQL advisory lock on its own connection). A second instance of the same configuration
stops with PROJECTION_CONFLICT (exit 1), naming the active one — or, with --standby, waits
("projection standing by") and takes over from the checkpoint when the active instance stops,
crashes or loses its connection ("projection taking over").

  $ event-assembler project --config projection.config.ts --standby   # on a second host

On SIGTERM or SIGINT: every runner finishes the batch in flight and stops; a summary line
("projections stopped": position, applied, skipped, parked per runner), exit 0. A second
signal exits at once (a batch not committed is rolled back and applied again on restart).
When one runner fails, the others are stopped the same way and the exit code is 1.

Exit codes:
  0  stopped (signal)
  1  fatal: a handler kept failing with onError 'halt' (PROJECTION_HANDLER_FAILED), another
     instance is active on the same partition (PROJECTION_CONFLICT; not with --standby), or PostgreSQL / KurrentDB
     could not be reached or was lost — the log line says which projection and why;
     restart after the fix: each runner resumes from its checkpoint
  2  the configuration could not be loaded or is invalid (every bad field is named, with
     its fix)
  130/143  a second SIGINT/SIGTERM: exited without waiting for the batch in flight
`;

const STATUS_HELP = `
For each projection of the configuration and each of its partitions with a checkpoint:
  POSITION  the checkpoint (the $all commit/prepare position applied up to; - for none)
  LAG       events of the projection (its categories or types, and its partition) after
            the checkpoint, counted by reading $all forward from it — up to ${LAG_CAP}
            ("${LAG_CAP}+": at least that many)
  PARKED    events parked in projection_failed_events
  UPDATED   when the checkpoint last moved
and the head of $all (its last event's position). Reads only; creates nothing.

Example:
  $ event-assembler project status --config projection.config.ts
  $ event-assembler project status --config projection.config.ts --json | jq '.partitions'

Exit codes: 0 shown, 1 PostgreSQL or KurrentDB could not be read, 2 configuration invalid.
`;

function summaryOf(runner: ProjectionRunner): Record<string, unknown> {
  const s = runner.status();
  return { projection: s.projection, partition: s.partition, state: s.state, position: s.position, applied: s.applied, unhandled: s.unhandled, skipped: s.skipped, parked: s.parked, batches: s.batches };
}

/** Runs every runner until a signal or the first failure (which stops the others); returns the exit code. */
async function runAll(runners: readonly ProjectionRunner[], logger: Logger): Promise<number> {
  let failure: unknown = null;
  const stopAll = () => Promise.all(runners.map((r) => r.stop()));
  const offSignals = onStopSignals(logger, () => void stopAll(), 'second signal: exiting without waiting for the batches in flight');
  try {
    await Promise.all(
      runners.map((runner) =>
        runner.run().catch(async (error: unknown) => {
          if (failure === null) {
            failure = error;
            if (!(error instanceof EventAssemblerError)) logger.error('unexpected error', { error });
            if (runners.length > 1) logger.warn('a projection failed: stopping the others', { projection: runner.status().projection, partition: runner.status().partition });
          }
          await stopAll();
        }),
      ),
    );
  } finally {
    offSignals();
  }
  const exitCode = failure === null ? PROJECT_EXIT_CODES.stopped : PROJECT_EXIT_CODES.fatal;
  logger.info('projections stopped', { exitCode, ...(failure !== null ? { error: failure } : {}), projections: runners.map(summaryOf) });
  return exitCode;
}

async function project(flags: ProjectFlags & { standby?: boolean }): Promise<void> {
  const base = createLogger({ format: flags.logFormat });
  const config = await configOrExit(flags.config, base);
  if (config === null) return;
  const logger = redacting(base, config);
  let runners: ProjectionRunner[];
  try {
    runners = config.projections.map((projection) =>
      createProjectionRunner({
        projection,
        postgres: config.postgres,
        kurrentdb: config.kurrentdb,
        stateSchema: config.stateSchema,
        // A projection rebuilt into generations keeps its serving one current; the others run as
        // ever, in `schema`. Chosen at start: after a rebuild or rollback, restart to follow.
        generation: 'serving',
        schema: config.schema,
        standby: flags.standby === true,
        ...(config.contracts ? { contracts: config.contracts } : {}),
        logger,
      }),
    );
  } catch (error) {
    if (!(error instanceof EventAssemblerError)) throw error;
    logger.error(error.message, { code: error.code, ...error.details });
    process.exitCode = PROJECT_EXIT_CODES.config;
    return;
  }
  try {
    process.exitCode = await runAll(runners, logger);
  } finally {
    exitSoon();
  }
}

async function status(flags: ProjectFlags & { json?: boolean }): Promise<void> {
  const base = createLogger({ format: flags.logFormat });
  const config = await configOrExit(flags.config, base);
  if (config === null) return;
  try {
    const report = await projectStatus(config);
    process.stdout.write(`${flags.json ? statusJson(report) : statusTable(report)}\n`);
  } catch (error) {
    redacting(base, config).error('could not read the projections\' status', { error });
    process.exitCode = PROJECT_EXIT_CODES.fatal;
  }
}

export function register(program: Command): void {
  const command = program
    .command('project')
    .summary('run projections: business events from KurrentDB applied once to PostgreSQL read models')
    .description('Runs the projections of a configuration module (one runner each) until SIGTERM/SIGINT.')
    // Not mandatory to commander: it would demand it of `project status` too. Options given
    // after `status` are parsed by this command (commander without positional options): the
    // subcommand reads them with optsWithGlobals().
    .addOption(configOption())
    .addOption(logFormatOption())
    .option('--standby', "when another instance is active on a projection partition, wait and take over when it stops (default: exit 1)")
    .addHelpText('after', HELP)
    .action((flags: Partial<ProjectFlags> & { standby?: boolean }, self: Command) => project(withConfig(flags, self)));
  command
    .command('status')
    .summary('each projection partition: checkpoint, head of $all, lag, parked events')
    .description('Shows where each projection partition of a configuration module stands. Human table by default, --json for machines.')
    .addOption(configOption())
    .option('--json', 'print one JSON document instead of a table')
    .addHelpText('after', STATUS_HELP)
    .action((_flags: unknown, self: Command) => status(withConfig(self.optsWithGlobals<Partial<ProjectFlags> & { json?: boolean }>(), self)));
  registerRebuild(command);
  registerRollback(command);
  registerGenerations(command);
  registerParked(command);
}
