import type { Command } from 'commander';

/** Each subcommand module exports `register(program)`; add new ones to this list. */
const registrations: Array<(program: Command) => void> = [];

export function registerCommands(program: Command): void {
  for (const register of registrations) register(program);
}
