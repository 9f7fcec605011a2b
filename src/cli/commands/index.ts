import type { Command } from 'commander';
import { register as registerSetup } from './setup.js';
import { register as registerContracts } from './contracts.js';
import { register as registerSnapshot } from './snapshot.js';
import { register as registerRun } from './run.js';
import { register as registerProject } from './project.js';
import { register as registerDemo } from './demo.js';
import { register as registerStatus } from './status.js';
import { register as registerTeardown } from './teardown.js';

/** Each subcommand module exports `register(program)`; add new ones to this list. */
const registrations: Array<(program: Command) => void> = [registerSetup, registerContracts, registerSnapshot, registerRun, registerStatus, registerProject, registerTeardown, registerDemo];

export function registerCommands(program: Command): void {
  for (const register of registrations) register(program);
}
