// Waiting in the demo: polls with a deadline that progress pushes back, and the error that
// means Ctrl-C (the command turns it into exit status 130).

const DEADLINE_MS = 60_000;

export class Interrupted extends Error {
  constructor() {
    super('interrupted');
  }
}

export function throwIfInterrupted(signal: AbortSignal): void {
  if (signal.aborted) throw new Interrupted();
}

/** Polls `done`; gives up after DEADLINE_MS without progress (`progress()` changing counts as progress). */
export async function waitFor(done: () => boolean, what: string, signal: AbortSignal, fatal: () => unknown, progress: () => unknown = () => null): Promise<void> {
  let deadline = Date.now() + DEADLINE_MS;
  let seen = progress();
  while (!done()) {
    const error = fatal();
    if (error) throw error;
    throwIfInterrupted(signal);
    const now = progress();
    if (now !== seen) {
      seen = now;
      deadline = Date.now() + DEADLINE_MS;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${DEADLINE_MS / 1000} s without progress waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
