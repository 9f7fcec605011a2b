// The postmasters this process started and has not seen exit. If the process exits without
// cleaning up (a failed test run, Ctrl-C), an exit hook stops them (SIGQUIT: immediate shutdown)
// and removes the directories the rig created, so no orphan server keeps a port or a data dir.
import { rmSync } from 'node:fs';

/** pid → the directory to remove at exit (the rig's own base directory), or undefined. */
const livePostmasters = new Map<number, string | undefined>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const [pid, dirToRemove] of livePostmasters) {
      try {
        process.kill(pid, 'SIGQUIT');
      } catch {
        // already gone
      }
      if (dirToRemove) {
        try {
          rmSync(dirToRemove, { recursive: true, force: true });
        } catch {
          // best effort at exit
        }
      }
    }
  });
}

export function registerPostmaster(pid: number, dirToRemove: string | undefined): void {
  installExitHook();
  livePostmasters.set(pid, dirToRemove);
}

export function unregisterPostmaster(pid: number): void {
  livePostmasters.delete(pid);
}
