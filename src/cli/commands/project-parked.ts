// `event-assembler project parked` lists the events projections parked (onError: 'park');
// `project parked replay` applies them again after a fix (replayParked, src/consumer/replay-parked.ts).
// Registered by project.ts; the --config option and configuration loading are project-options.ts'.
import { Option, type Command } from 'commander';
import { listParkedEvents, ProjectionConfigError, replayParked, type ParkedEvent, type ResolvedProjectionConfig } from '../../consumer/index.js';
import { createLogger, type LogFormat, type Logger } from '../../pipeline/index.js';
import { onStopSignals } from '../stop-signals.js';
import { configOption, configOrExit, redacting } from './project-options.js';
import { parkedJson, parkedTable, replayJson, replayTable } from './project-parked-output.js';

/** Exit codes of `project parked` and `project parked replay`. */
export const PARKED_EXIT_CODES = {
  /** Listed; or every selected event was applied, already applied, or no longer parked (none parked included). */
  done: 0,
  /** Replay: an event failed again, stayed superseded or deleted, or has no handler (kept parked), or a stop signal ended it early; both: PostgreSQL could not be reached or was lost. */
  unresolved: 1,
  /** The configuration is invalid, --projection is missing or not in it, an --id is not a parked event (nothing replayed). */
  usage: 2,
} as const;

/** A progress line every this many replayed events. */
export const PROGRESS_EVERY = 100;

interface ParkedFlags {
  config?: string;
  logFormat?: LogFormat;
  projection?: string;
  json?: boolean;
  id?: string[];
  includeSuperseded?: boolean;
}

const LIST_HELP = `
Lists the events your projections parked (onError: 'park'): a handler kept failing on them (or
they broke their contract), so each went to projection_failed_events with its data, metadata
and diagnosis, and the runner moved on. One line per event, oldest $all position first:
projection, partition, event id, type, stream@revision, $all position, failed attempts, when it
was parked (or last failed a replay), the error. --json adds the data and metadata (the
stack is in the table's error_stack column). Reads only.

Example:
  $ event-assembler project parked --config projection.config.ts
  $ event-assembler project parked --config projection.config.ts --projection accounts --json

After fixing the cause (the handler, a contract, missing data), apply them with
  $ event-assembler project parked replay --config projection.config.ts --projection accounts

Exit codes: 0 listed (also when none), 1 PostgreSQL could not be read, 2 configuration invalid
or --projection not in it.
`;

const REPLAY_HELP = `
Applies a projection's parked events again, after a fix — every partition's (a projection
listed once per partition is one name), oldest first, or only the --id ones. Each in one
PostgreSQL transaction that locks its partition's checkpoint row, so it takes turns with a
running runner's batches (leave the runner running; start it once after a fix in setup):
  already applied  it has a receipt: the parked row is dropped, nothing runs again
  entity deleted   a delete of its entity came after it: kept parked, not applied — a deleted
                   entity stays deleted, even with --include-superseded
  superseded       its entity has a newer source version (a later event was applied): kept
                   parked; --include-superseded applies it anyway (for order-independent
                   handlers such as increments; the entity's version is not lowered; never a
                   delete event)
  applied          validated and upcast with the configured contracts, handled; a receipt
                   and the entity's version recorded; the parked row dropped
  failed again     the handler (or contract) threw: rolled back, kept parked with the new
                   error and one more attempt
  no handler       the projection no longer handles its type: kept parked
The checkpoint never moves. A progress line every ${PROGRESS_EVERY} events; on SIGTERM/SIGINT the
event in flight finishes and the rest stay parked.

Example:
  $ event-assembler project parked replay --config projection.config.ts --projection accounts
  $ event-assembler project parked replay --config projection.config.ts --projection accounts \\
      --id 0b7d4c1e-5f8a-5d2b-9c3e-1a2b3c4d5e6f --include-superseded --json

Exit codes:
  0  every selected event was applied, was already applied or is no longer parked (also
     when none was parked)
  1  an event is still parked (failed again, superseded, entity deleted, no handler), a
     signal stopped the replay early, or PostgreSQL could not be reached or was lost
  2  the configuration is invalid, --projection is missing or not in it, or an --id is not a
     parked event of it (nothing was replayed)
`;

function usage(logger: Logger, message: string, fields: Record<string, unknown>): void {
  logger.error(message, fields);
  process.exitCode = PARKED_EXIT_CODES.usage;
}

function configured(config: ResolvedProjectionConfig): string[] {
  return [...new Set(config.projections.map((p) => p.name))];
}

async function list(flags: ParkedFlags & { config: string }): Promise<void> {
  const base = createLogger({ format: flags.logFormat ?? 'json' });
  const config = await configOrExit(flags.config, base);
  if (config === null) return;
  const names = configured(config);
  if (flags.projection !== undefined && !names.includes(flags.projection)) {
    return usage(base, `projection "${flags.projection}" is not in the configuration`, { projection: flags.projection, configured: names });
  }
  try {
    const parked: ParkedEvent[] = [];
    for (const name of flags.projection === undefined ? names : [flags.projection]) {
      parked.push(...(await listParkedEvents({ postgres: config.postgres, projection: name, stateSchema: config.stateSchema })));
    }
    process.stdout.write(`${flags.json ? parkedJson(parked) : parkedTable(parked)}\n`);
  } catch (error) {
    redacting(base, config).error('could not read the parked events', { error });
    process.exitCode = PARKED_EXIT_CODES.unresolved;
  }
}

async function replay(flags: ParkedFlags & { config: string }): Promise<void> {
  const base = createLogger({ format: flags.logFormat ?? 'json' });
  const config = await configOrExit(flags.config, base);
  if (config === null) return;
  const names = configured(config);
  if (flags.projection === undefined) return usage(base, 'name the projection to replay: --projection <name>', { configured: names });
  // A projection listed once per partition: the same handlers; the replay covers every partition.
  const projection = config.projections.find((p) => p.name === flags.projection);
  if (!projection) return usage(base, `projection "${flags.projection}" is not in the configuration`, { projection: flags.projection, configured: names });
  const logger = redacting(base, config);
  const stop = new AbortController();
  const offSignals = onStopSignals(logger, () => stop.abort(), 'second signal: exiting; the event in flight rolls back and stays parked');
  try {
    const result = await replayParked({
      projection,
      postgres: config.postgres,
      stateSchema: config.stateSchema,
      schema: config.schema,
      ...(config.contracts ? { contracts: config.contracts } : {}),
      ...(flags.id && flags.id.length > 0 ? { ids: flags.id } : {}),
      includeSuperseded: flags.includeSuperseded === true,
      signal: stop.signal,
      logger,
      onProgress: ({ done, total }) => {
        if (done % PROGRESS_EVERY === 0 && done < total) logger.info('replaying parked events', { projection: projection.name, done, total });
      },
    });
    process.stdout.write(`${flags.json ? replayJson(result) : replayTable(result)}\n`);
    process.exitCode = result.resolved ? PARKED_EXIT_CODES.done : PARKED_EXIT_CODES.unresolved;
  } catch (error) {
    if (error instanceof ProjectionConfigError) return usage(logger, error.message, { code: error.code, ...error.details });
    logger.error('could not replay the parked events', { projection: projection.name, error });
    process.exitCode = PARKED_EXIT_CODES.unresolved;
  } finally {
    offSignals();
  }
}

function requireConfig(flags: ParkedFlags, command: Command): ParkedFlags & { config: string } {
  if (typeof flags.config !== 'string') command.error("error: required option '--config <file>' not specified", { exitCode: PARKED_EXIT_CODES.usage });
  return flags as ParkedFlags & { config: string };
}

/** Adds `parked` (and `parked replay`) under `project`. Options are read with optsWithGlobals: the parent commands parse the ones they know. */
export function registerParked(project: Command): void {
  const projectionOption = () => new Option('--projection <name>', 'the projection (by name) whose parked events to show or replay');
  const parked = project
    .command('parked')
    .summary('list the events projections parked; `parked replay` applies them after a fix')
    .description('Lists parked events (onError: park) of the configured projections, oldest first. Human table by default, --json for machines.')
    .addOption(configOption())
    .addOption(projectionOption())
    .option('--json', 'print one JSON document instead of a table')
    .addHelpText('after', LIST_HELP)
    .action((_flags: unknown, self: Command) => list(requireConfig(self.optsWithGlobals<ParkedFlags>(), self)));
  parked
    .command('replay')
    .summary("apply a projection's parked events again, after a fix")
    .description("Replays a projection's parked events, each in one transaction with the receipt and entity-version guards; the checkpoint never moves.")
    .addOption(configOption())
    .addOption(projectionOption())
    .option('--id <eventId>', 'only this parked event (repeat for several)', (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
    .option('--include-superseded', 'also apply events older than their entity\'s recorded version (order-independent handlers, e.g. increments)')
    .option('--json', 'print one JSON document instead of a table')
    .addHelpText('after', REPLAY_HELP)
    .action((_flags: unknown, self: Command) => replay(requireConfig(self.optsWithGlobals<ParkedFlags>(), self)));
}
