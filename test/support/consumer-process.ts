// The consumer child (consumer-child.ts) seen from the test: spawned with `node --import tsx`
// (no wrapper process, so a SIGKILL hits the consumer itself), its stdout read as JSON lines, its
// stderr kept for failure messages. The test process is always reading both pipes, so a child
// never blocks on a full pipe.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHILD = path.join(REPO_ROOT, 'test', 'support', 'consumer-child.ts');

export type ChildMessage = Record<string, unknown> & { readonly event: string };
export type ChildExit = { code: number | null; signal: NodeJS.Signals | null };

export interface ConsumerProcess {
  readonly pid: number;
  readonly running: boolean;
  readonly exited: Promise<ChildExit>;
  /** Resolves with the first line (already received or to come) that `match` accepts; rejects at the deadline or when the child exits first. */
  waitForMessage(match: (message: ChildMessage) => boolean, timeoutMs?: number): Promise<ChildMessage>;
  kill(signal: NodeJS.Signals): Promise<ChildExit>;
  /** The last part of the child's stderr (the runner's log). */
  stderrTail(chars?: number): string;
}

export function startConsumerProcess(env: Record<string, string>): ConsumerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const messages: ChildMessage[] = [];
  const listeners = new Set<() => void>();
  let stderr = '';
  let running = true;
  const notify = () => {
    for (const listener of [...listeners]) listener();
  };
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      messages.push(JSON.parse(line) as ChildMessage);
    } catch {
      stderr += `[stdout] ${line}\n`;
    }
    notify();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-64_000);
  });
  const exited = new Promise<ChildExit>((resolve) => {
    child.once('exit', (code, signal) => {
      running = false;
      resolve({ code, signal });
      notify();
    });
    child.once('error', (error) => {
      running = false;
      stderr += `[spawn] ${String(error)}\n`;
      resolve({ code: null, signal: null });
      notify();
    });
  });

  return {
    pid: child.pid ?? -1,
    exited,
    get running() {
      return running;
    },
    waitForMessage(match, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = messages.find(match);
          if (found) return done(() => resolve(found));
          if (!running) return done(() => reject(new Error(`the consumer child (pid ${child.pid}) exited before the awaited line`)));
        };
        const timer = setTimeout(() => done(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for a line from the consumer child (pid ${child.pid})`))), timeoutMs);
        const done = (settle: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          settle();
        };
        listeners.add(check);
        check();
      });
    },
    async kill(signal) {
      if (running) child.kill(signal);
      return exited;
    },
    stderrTail(chars = 4_000) {
      return stderr.slice(-chars);
    },
  };
}
