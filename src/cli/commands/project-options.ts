// What the `project` commands share: the configuration module loaded (or exit 2), the projection
// named on the command line (or exit 2), logs with the configuration's secrets masked, the
// `--config` and `--log-format` options, the exit codes.
import { Option, type Command } from 'commander';
import { ConfigError, ConfigLoadError } from '../../config/index.js';
import { loadProjectionConfig, type Projection, type ResolvedProjectionConfig } from '../../consumer/index.js';
import { createLogger, type LogFormat, type Logger } from '../../pipeline/index.js';

export interface ProjectFlags {
  config: string;
  logFormat: LogFormat;
}

/** Exit codes of `event-assembler project` and its subcommands. */
export const PROJECT_EXIT_CODES = {
  /** `project`: stopped by a signal; the others: done. */
  stopped: 0,
  /** Failed: a runner, a rebuild (not switched in), a rollback, or a server could not be reached. */
  fatal: 1,
  /** The configuration could not be loaded or is invalid, or names no such projection. */
  config: 2,
} as const;

/** Loads the configuration, or logs why not (with `process.exitCode` 2) and returns null. */
export async function configOrExit(file: string, logger: Logger): Promise<ResolvedProjectionConfig | null> {
  try {
    return await loadProjectionConfig(file);
  } catch (error) {
    if (!(error instanceof ConfigError || error instanceof ConfigLoadError)) throw error;
    logger.error(error.message, { code: error.code, ...(error instanceof ConfigError ? { problems: error.problems } : error.details) });
    process.exitCode = PROJECT_EXIT_CODES.config;
    return null;
  }
}

/** The configured projection named `name` (the first entry when it is listed per partition), or logs why not (exit code 2) and returns null. */
export function projectionOrExit(config: ResolvedProjectionConfig, name: string, logger: Logger): Projection<any> | null {
  const found = config.projections.find((p) => p.name === name);
  if (found) return found;
  const names = [...new Set(config.projections.map((p) => p.name))];
  logger.error(`no projection "${name}" in the configuration`, { code: 'PROJECTION_UNKNOWN', field: '--projection', projection: name, projections: names, fix: `use one of: ${names.join(', ')}` });
  process.exitCode = PROJECT_EXIT_CODES.config;
  return null;
}

/** A subcommand's start on one projection: the configuration, its redacting logger and the projection — or null, having logged why (exit code 2). */
export async function projectionCommandOrExit(
  flags: { readonly config: string; readonly logFormat: LogFormat },
  name: string,
): Promise<{ config: ResolvedProjectionConfig; logger: Logger; projection: Projection<any> } | null> {
  const base = createLogger({ format: flags.logFormat });
  const config = await configOrExit(flags.config, base);
  if (config === null) return null;
  const logger = redacting(base, config);
  const projection = projectionOrExit(config, name, logger);
  return projection === null ? null : { config, logger, projection };
}

export function redacting(base: Logger, config: ResolvedProjectionConfig): Logger {
  const { redactor } = config;
  return {
    info: (m, f) => base.info(redactor.text(m), redactor.fields(f)),
    warn: (m, f) => base.warn(redactor.text(m), redactor.fields(f)),
    error: (m, f) => base.error(redactor.text(m), redactor.fields(f)),
  };
}

export const configOption = () => new Option('--config <file>', 'configuration module (.ts, .mts, .js, .mjs) that default-exports defineProjectionConfig({...})');
export const logFormatOption = () => new Option('--log-format <format>', 'log lines as JSON or for humans').choices(['json', 'pretty']).default('json');

/** The flags with `--config` given, or exits 2 saying it is missing. */
export function withConfig<F extends Partial<ProjectFlags>>(flags: F, command: Command): F & ProjectFlags {
  if (typeof flags.config !== 'string') command.error("error: required option '--config <file>' not specified", { exitCode: PROJECT_EXIT_CODES.config });
  return flags as F & ProjectFlags;
}

/** A subcommand's flags (options given after the subcommand are parsed by `project`: read them all), `--config` checked. */
export function subcommandFlags<F>(command: Command): F & ProjectFlags {
  return withConfig(command.optsWithGlobals<Partial<ProjectFlags> & F>(), command);
}

/** Client libraries may keep handles open for a while after close; do not hang the exit. */
export function exitSoon(): void {
  setTimeout(() => process.exit(), 5_000).unref();
}
