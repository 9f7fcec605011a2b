/**
 * Loads a configuration module (`.ts`, `.mts`, `.cts`, `.js`, `.mjs`, `.cjs`): its default export (or an export
 * named `config`) is the {@link AssemblerConfig}. TypeScript is compiled on the main thread
 * (compile-module.ts), so no build step is needed. A module that fails to load is reported with its file and line.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, extname, resolve } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { EventAssemblerError } from '../errors.js';
import { importCompiledModule } from './compile-module.js';
import { parseConfig, type AssemblerConfig, type ResolvedConfig } from './schema.js';

/** The configuration module could not be loaded; `file` and (when known) `line`/`column` say where. */
export class ConfigLoadError extends EventAssemblerError {
  declare readonly code: 'CONFIG_LOAD_FAILED';
  declare readonly details: { readonly file: string; readonly line: number | null; readonly column: number | null; readonly reason: string; readonly fix: string | null };
  readonly file: string;
  readonly line: number | null;
  constructor(file: string, line: number | null, column: number | null, reason: string, cause?: unknown, fix: string | null = null) {
    const where = line === null ? file : `${file}:${line}${column === null ? '' : `:${column}`}`;
    super('CONFIG_LOAD_FAILED', `could not load the configuration module ${where}: ${reason}${fix ? ` — fix: ${fix}` : ''}`, { file, line, column, reason, fix }, { cause });
    this.file = file;
    this.line = line;
  }
}

const EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs']);

function toPath(location: string): string {
  // Vite (vitest) prefixes absolute paths outside the project with /@fs.
  if (location.startsWith('/@fs/')) return location.slice(4);
  if (location.startsWith('file://')) {
    try {
      return fileURLToPath(location);
    } catch {
      return location;
    }
  }
  return location;
}

/**
 * Finds where in `files` a load error points: esbuild's build failure (a TypeScript module, see
 * compile-module.ts), Node's syntax-error header `file:///…:line`, or the first stack frame inside
 * one of the files (TypeScript's mapped to its lines by the compiled module's source map).
 */
export function locateLoadError(error: unknown, file: string): { file: string; line: number | null; column: number | null; reason: string } {
  const err = error instanceof Error ? error : new Error(String(error));
  // esbuild's build failure (compile-module.ts): the location's file is relative to the working directory, its column 0-based.
  const failed = (error as { errors?: ReadonlyArray<{ text: string; location: { file: string; line: number; column: number } | null }> } | null)?.errors?.[0];
  if (failed?.location) return { file: resolve(failed.location.file), line: failed.location.line, column: failed.location.column + 1, reason: failed.text };
  const reason = `${err.name}: ${(err.message.split('\n').find((l) => l.trim() !== '') ?? err.message).trim()}`;
  // Node's SyntaxError for ESM: the stack starts with "file:///abs/file.mjs:3"
  const header = /^((?:file:\/\/)?\/[^\s:]+):(\d+)\s*$/m.exec(err.stack ?? '');
  if (header && err.name === 'SyntaxError') {
    return { file: toPath(header[1]!), line: Number(header[2]), column: null, reason: `${err.name}: ${err.message}` };
  }
  // Node reports no location for an ES module's syntax error; `node --check` does.
  // (Under other loaders, e.g. vitest's, the error may not even be a SyntaxError: check any JS file.)
  if (/\.[cm]?js$/.test(file)) {
    const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 10_000 });
    const at = /^(.+):(\d+)\s*$/m.exec(check.stderr ?? '');
    const syntax = /^SyntaxError: (.+)$/m.exec(check.stderr ?? '');
    if (check.status !== 0 && at && syntax) return { file: toPath(at[1]!), line: Number(at[2]), column: null, reason: `SyntaxError: ${syntax[1]!}` };
  }
  // Runtime errors: the first frame in the config file, else in any user file (not node_modules / internals).
  const frames = [...(err.stack ?? '').matchAll(/(?:\(|at )((?:file:\/\/)?\/[^\s()]+?):(\d+):(\d+)\)?$/gm)].map((m) => ({ file: toPath(m[1]!), line: Number(m[2]), column: Number(m[3]) }));
  const inConfig = frames.find((f) => f.file === file);
  const self = fileURLToPath(import.meta.url).replace(/\.[jt]s$/, '');
  const inUser = frames.find((f) => !f.file.includes('/node_modules/') && !f.file.startsWith('node:') && !f.file.startsWith(self) && !f.file.includes('/src/config/'));
  const frame = inConfig ?? inUser;
  if (frame) return { ...frame, reason };
  return { file, line: null, column: null, reason };
}

/** Imports the module and returns its raw (unvalidated) configuration. */
export async function importConfigModule(file: string): Promise<{ file: string; config: AssemblerConfig }> {
  const path = resolve(process.cwd(), file);
  if (!existsSync(path)) {
    throw new ConfigLoadError(path, null, null, 'the file does not exist (the path is resolved against the working directory)', undefined, 'pass --config the path of your configuration module');
  }
  const ext = extname(path);
  if (!EXTENSIONS.has(ext)) throw new ConfigLoadError(path, null, null, `unsupported extension "${ext}"; use .ts, .mts, .cts, .js, .mjs or .cjs`);
  const url = pathToFileURL(path).href;
  let mod: Record<string, unknown>;
  // Stack traces of TypeScript modules then point at the original lines (the compiled module carries a source map).
  process.setSourceMapsEnabled(true);
  try {
    if (ext === '.ts' || ext === '.mts' || ext === '.cts') {
      mod = await importCompiledModule(path);
    } else {
      mod = (await import(url)) as Record<string, unknown>;
    }
  } catch (error) {
    const where = locateLoadError(error, path);
    const fix = `correct ${where.line === null ? where.file : `line ${where.line} of ${where.file}`}: the module must load without an error and default-export defineConfig({ ... })`;
    throw new ConfigLoadError(where.file, where.line, where.column, where.reason, error, fix);
  }
  let config = mod['default'] ?? mod['config'];
  // A compiled CommonJS module (.cts) default-exports its module.exports: { default: { default: config } }
  if (config && typeof config === 'object' && 'default' in config && !('name' in config)) config = (config as { default: unknown }).default;
  if (config === undefined) {
    throw new ConfigLoadError(path, null, null, 'the module has no default export; write `export default defineConfig({ ... })`');
  }
  return { file: path, config: config as AssemblerConfig };
}

/** Loads and validates a configuration module. Throws {@link ConfigLoadError} or `ConfigError`. */
export async function loadConfig(file: string): Promise<ResolvedConfig> {
  const { file: path, config } = await importConfigModule(file);
  return parseConfig(config, { baseDir: dirname(path) });
}
