// `event-assembler project rollback`: serves an earlier generation of one configured projection
// again (rollbackProjection: readers' views switched back in one transaction).
import { Option, type Command } from 'commander';
import { ProjectionConfigError, rollbackProjection } from '../../consumer/index.js';
import { EventAssemblerError } from '../../errors.js';
import { configOption, PROJECT_EXIT_CODES, projectionCommandOrExit, subcommandFlags } from './project-options.js';

interface RollbackFlags {
  projection?: string;
  to?: string;
  json?: boolean;
}

const HELP = `
Switches the readers' views in schema <name> back, in one transaction, to the generation that
served before the serving one (its "previous" in project generations) — or to --to <generation>,
any generation kept as standby. The generation rolled back from stays, standby: rolling back
to it again (--to) serves it again. Nothing is rebuilt or deleted.

Example:
  $ event-assembler project generations --config projection.config.ts --projection outstanding
  $ event-assembler project rollback --config projection.config.ts --projection outstanding
  outstanding: generation 2 serves again (was 3; 3 kept as standby)
    next: restart event-assembler project so that it keeps generation 2 current

A runner of event-assembler project keeps writing the generation it started with: restart it
after a rollback (a generation not kept current serves the state of when it last ran).

Exit codes:
  0  rolled back: readers see the generation named in the output
  1  nothing to roll back to (no generation serves, none served before, or --to names a
     generation that does not exist or is not standby), or PostgreSQL failed
  2  the configuration could not be loaded or is invalid, no projection of that name, or a
     bad --to
`;

async function rollback(flags: RollbackFlags & { config: string; logFormat: 'json' | 'pretty' }, command: Command): Promise<void> {
  if (typeof flags.projection !== 'string') command.error("error: required option '--projection <name>' not specified", { exitCode: PROJECT_EXIT_CODES.config });
  if (flags.to !== undefined && !/^[1-9]\d{0,8}$/.test(flags.to)) command.error(`error: --to must be a generation number (1, 2, …), not "${flags.to}"`, { exitCode: PROJECT_EXIT_CODES.config });
  const started = await projectionCommandOrExit(flags, flags.projection!);
  if (started === null) return;
  const { config, logger, projection } = started;
  try {
    const result = await rollbackProjection({ postgres: config.postgres, stateSchema: config.stateSchema, projection: projection.name, ...(flags.to ? { to: Number(flags.to) } : {}) });
    logger.info('rollback switched readers', { ...result });
    const text = [
      `${result.projection}: generation ${result.generation} serves again (was ${result.from}; ${result.from} kept as standby)`,
      `  next: restart event-assembler project so that it keeps generation ${result.generation} current`,
    ].join('\n');
    process.stdout.write(`${flags.json ? JSON.stringify({ outcome: 'rolled back', ...result }, null, 2) : text}\n`);
  } catch (error) {
    const message = config.redactor.text(error instanceof Error ? error.message : String(error));
    logger.error('rollback failed', { projection: projection.name, error });
    const code = error instanceof EventAssemblerError ? error.code : null;
    const text = `${projection.name}: rollback failed, readers unchanged — ${message}`;
    process.stdout.write(`${flags.json ? JSON.stringify({ outcome: 'failed', projection: projection.name, error: { code, message } }, null, 2) : text}\n`);
    process.exitCode = error instanceof ProjectionConfigError ? PROJECT_EXIT_CODES.config : PROJECT_EXIT_CODES.fatal;
  }
}

export function register(project: Command): void {
  project
    .command('rollback')
    .summary('serve the generation that served before the serving one again')
    .description("Switches readers' views of one projection back to an earlier generation (the serving one's previous, or --to), in one transaction.")
    .addOption(configOption())
    .addOption(new Option('--projection <name>', 'the projection to roll back (its name in the configuration)'))
    .addOption(new Option('--to <generation>', 'the generation to serve again (default: the serving one\'s previous)'))
    .option('--json', 'print the outcome as one JSON document')
    .addHelpText('after', HELP)
    .action((_flags: unknown, self: Command) => rollback(subcommandFlags<RollbackFlags>(self), self));
}
