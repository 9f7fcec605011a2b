// The assembler as a child process, for resilience tests: `node bin/event-assembler.js run
// --config <file>`, its output kept in a log file, killed with SIGKILL (a crash) or stopped with
// SIGTERM (graceful). The databases it talks to live in the test process and survive its death.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = path.join(REPO_ROOT, 'bin', 'event-assembler.js');
/** The Node flags of the CLI's shebang line (`node bin/…` alone would run without them). */
export const CLI_NODE_FLAGS: readonly string[] = readFileSync(BIN, 'utf8').split('\n')[0]!.replace(/^#!.*?\bnode\b/, '').split(' ').filter(Boolean);

export interface AssemblerProcess {
  readonly pid: number;
  /** Resolves with the exit code and signal once the process is gone. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly running: boolean;
  kill(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Spawns the CLI; stdout and stderr are appended to `logFile` (never piped: a dead reader must not
 * block it). `command`: what runs before `run --config …` (default: `bin/event-assembler.js` with
 * its shebang's Node flags, as a user runs it; a benchmark may run a build).
 */
export function startAssemblerProcess(configFile: string, logFile: string, env: NodeJS.ProcessEnv = {}, command: readonly string[] = [...CLI_NODE_FLAGS, BIN]): AssemblerProcess {
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
