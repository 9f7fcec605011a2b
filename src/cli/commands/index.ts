import type { Command } from 'commander';

/**
 * Each subcommand module exports `register(program)`; add new ones to this list (in help order).
 * Loaded on demand: `run` does not load the consumer kit, the demo's embedded servers or the
 * status page — less to load, and less memory for the long-running commands.
 */
const modules: Record<string, () => Promise<{ register(program: Command): void }>> = {
  setup: () => import('./setup.js'),
  contracts: () => import('./contracts.js'),
  snapshot: () => import('./snapshot.js'),
  run: () => import('./run.js'),
  status: () => import('./status.js'),
  reconcile: () => import('./reconcile.js'),
  project: () => import('./project.js'),
  teardown: () => import('./teardown.js'),
  demo: () => import('./demo.js'),
};

/** Registers `only` when it names a subcommand (the one about to run), every subcommand otherwise (help, errors). */
export async function registerCommands(program: Command, only?: string): Promise<void> {
  const names = only !== undefined && Object.hasOwn(modules, only) ? [only] : Object.keys(modules);
  for (const name of names) (await modules[name]!()).register(program);
}
