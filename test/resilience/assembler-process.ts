// The assembler as a child process, for resilience tests: `event-assembler run --config <file>`
// (the CLI of `cliArgs`), its output kept in a log file, killed with SIGKILL (a crash) or stopped with
// SIGTERM (graceful). The databases it talks to live in the test process and survive its death.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TEST_CLI_ENV } from '../support/cli-build.js';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = path.join(REPO_ROOT, 'bin', 'event-assembler.js');
/** The Node flags of the CLI's shebang line (`node bin/…` alone would run without them). */
export const CLI_NODE_FLAGS: readonly string[] = readFileSync(BIN, 'utf8').split('\n')[0]!.replace(/^#!.*?\bnode\b/, '').split(' ').filter(Boolean);

/**
 * The arguments to `node` that start the CLI (the subcommand follows): in a vitest run, the CLI
 * global setup transpiled (test/support/cli-build.ts), after bin/main-thread-heap.js as the bin
 * loads it; elsewhere (benchmarks), `bin/event-assembler.js`.
 */
export function cliArgs(): string[] {
  const entry = process.env[TEST_CLI_ENV];
  return entry ? ['--import', path.join(REPO_ROOT, 'bin', 'main-thread-heap.js'), entry] : [BIN];
}

export interface AssemblerProcess {
  readonly pid: number;
  /** Resolves with the exit code and signal once the process is gone. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly running: boolean;
  kill(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Spawns the CLI; stdout and stderr are appended to `logFile` (never piped: a dead reader must not
 * block it). `command`: what runs before `run --config …` (default: the CLI of {@link cliArgs} with
 * the shebang's Node flags, as a user runs it; a benchmark may run a build).
 */
export function startAssemblerProcess(configFile: string, logFile: string, env: NodeJS.ProcessEnv = {}, command: readonly string[] = [...CLI_NODE_FLAGS, ...cliArgs()]): AssemblerProcess {
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, [...command, 'run', '--config', configFile], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', fd, fd],
    });
  } finally {
    closeSync(fd);
  }
  let running = true;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      running = false;
      resolve({ code, signal });
    });
    child.once('error', () => {
      running = false;
      resolve({ code: null, signal: null });
    });
  });
  return {
    pid: child.pid ?? -1,
    exited,
    get running() {
      return running;
    },
    async kill(signal) {
      if (running) child.kill(signal);
      return exited;
    },
  };
}

/** The last `bytes` of a log file, for failure messages. */
export async function tailOf(file: string, bytes = 6_000): Promise<string> {
  try {
    const text = await fs.readFile(file, 'utf8');
    return text.slice(-bytes);
  } catch {
    return '(no log)';
  }
}

/** Polls `check` every `intervalMs` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function waitFor<T>(
  description: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 60_000, intervalMs = 20 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** One poll of {@link waitWhileProgressing}: a measure of progress, and the condition's value. */
export interface ProgressPoll<T> {
  /** Compared with the previous poll's: any change counts as progress. */
  readonly progress: number;
  /** The awaited value; undefined or false while not there yet. */
  readonly done: T | undefined | false;
}

/**
 * Polls until `poll` gives a value in `done`, and fails when its `progress` has not changed for
 * `stallMs` (stuck) — not after a fixed time: on a loaded 2-core machine a start-up and a few
 * chunks can take several times what they take alone. `capMs` bounds the whole wait. `poll` reads
 * both in one go (measures that scan the destination are not taken twice); `stuck` says what the
 * failure should add (the process's output, the slot's position).
 */
export async function waitWhileProgressing<T>(
  description: string,
  poll: () => Promise<ProgressPoll<T>> | ProgressPoll<T>,
  options: { stallMs: number; capMs: number; intervalMs?: number; stuck?: (progress: number) => string | Promise<string> },
): Promise<T> {
  let seen: number | undefined;
  let changed = Date.now();
  return waitFor(
    description,
    async () => {
      const { progress, done } = await poll();
      if (done !== undefined && done !== false) return done;
      if (progress !== seen) [seen, changed] = [progress, Date.now()];
      if (Date.now() - changed > options.stallMs) {
        const detail = options.stuck ? await options.stuck(progress) : `progress stayed at ${progress}`;
        throw new Error(`stuck: ${description}, but ${detail} for ${options.stallMs / 1000} s`);
      }
      return undefined;
    },
    { timeoutMs: options.capMs, intervalMs: options.intervalMs ?? 20 },
  );
}

export interface InvoicingConfigOptions {
  readonly name: string;
  readonly slot: string;
  readonly publication: string;
  readonly tables: readonly string[];
  /** Environment variables the module reads the capture URL and the KurrentDB connection string from. */
  readonly captureEnv: string;
  readonly kurrentEnv: string;
  /** `destination.mode`, when not the default. */
  readonly destinationMode?: string;
  /** `snapshot.mode: 'initial'` with this chunk size; no `snapshot` section when absent. */
  readonly initialSnapshotChunkSize?: number;
}

/**
 * Writes the configuration module a user would: the invoicing mappers and contracts of this
 * repository, secrets from the environment. Returns the file's path.
 */
export async function writeInvoicingConfig(file: string, o: InvoicingConfigOptions): Promise<string> {
  const source = `{ connection: 'env:${o.captureEnv}', slot: ${JSON.stringify(o.slot)}, publication: ${JSON.stringify(o.publication)}, tables: ${JSON.stringify(o.tables)}, statusIntervalMs: 1000 }`;
  const mode = o.destinationMode === undefined ? '' : `mode: ${JSON.stringify(o.destinationMode)}, `;
  const lines = [
    `import { defineConfig } from ${JSON.stringify(pathToFileURL(path.join(REPO_ROOT, 'src/config/index.ts')).href)};`,
    `import { mappers } from ${JSON.stringify(pathToFileURL(path.join(REPO_ROOT, 'examples/invoicing/index.ts')).href)};`,
    `export default defineConfig({`,
    `  name: ${JSON.stringify(o.name)},`,
    `  source: ${source},`,
    `  destination: { connectionString: 'env:${o.kurrentEnv}', ${mode}retry: { initialDelayMs: 20, maxDelayMs: 500 } },`,
    `  mappers,`,
    `  contracts: { dir: ${JSON.stringify(path.join(REPO_ROOT, 'contracts/invoicing'))} },`,
    ...(o.initialSnapshotChunkSize === undefined ? [] : [`  snapshot: { mode: 'initial', chunkSize: ${o.initialSnapshotChunkSize} },`]),
    `});`,
    '',
  ];
  await fs.writeFile(file, lines.join('\n'));
  return file;
}

/** A process's start-up snapshot decision, as its log line `snapshot: decision` says it. */
export interface StartDecision {
  readonly action: string;
  readonly generation: string | null;
  readonly code: string;
}

/**
 * Waits for the `snapshot: decision` line a process logs at start, in `logFile` after byte
 * `offset`; `alive` throws when the process exited meanwhile.
 */
export function waitForStartDecision(pid: number | undefined, logFile: string, offset: number, alive: () => Promise<void>, timeoutMs: number): Promise<StartDecision> {
  return waitFor(
    `the start-up decision of the assembler (pid ${pid})`,
    async () => {
      await alive();
      const text = (await fs.readFile(logFile)).subarray(offset).toString('utf8');
      for (const line of text.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const entry = JSON.parse(line) as Record<string, unknown>;
          if (entry['msg'] === 'snapshot: decision') return { action: String(entry['action']), generation: (entry['generation'] as string | null) ?? null, code: String(entry['code']) };
        } catch {
          // a line cut by a kill: not a decision
        }
      }
      return false;
    },
    { timeoutMs, intervalMs: 20 },
  );
}
