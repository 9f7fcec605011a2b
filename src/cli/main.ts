#!/usr/bin/env node
// The `event-assembler` command. Each subcommand lives in `commands/<name>.ts` and exports
// `register(program)`; this file only assembles them — given the command line, only the
// subcommand it names (commands/index.ts).
import { Command } from 'commander';
import { registerCommands } from './commands/index.js';

/** The program; with `argv`, only the subcommand it names is loaded (all for help or an unknown one). */
export async function buildProgram(argv?: readonly string[]): Promise<Command> {
  const program = new Command();
  program
    .name('event-assembler')
    .description(
      'Turns PostgreSQL row changes into versioned business events in KurrentDB.\n\n' +
        'Capture reads a logical replication slot (pgoutput) and groups changes by source ' +
        'transaction; your mappers turn each complete transaction into business events, each ' +
        'validated against its JSON Schema contract and appended to KurrentDB with a ' +
        'deterministic id and a specific expected revision.',
    )
    .showHelpAfterError('(run with --help for usage)');
  await registerCommands(program, argv?.[2]);
  return program;
}

const isMain = process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  buildProgram(process.argv)
    .then((program) => program.parseAsync(process.argv))
    .catch((error: unknown) => {
      console.error(error instanceof Error ? error.message : String(error));
      process.exitCode = process.exitCode || 1;
    });
}
