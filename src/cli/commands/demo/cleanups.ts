// What the demo must undo, in the order it did it: servers it started, and on your servers
// (--source, --kurrentdb) every object it created. Run in reverse at the end of every run —
// success, failure or Ctrl-C alike; one failing cleanup does not stop the others.

export interface Cleanups {
  /** Registers an undo step; register it right after the thing it undoes exists. */
  push(label: string, run: () => Promise<unknown>): void;
  /** Runs every step, last registered first, reporting failures through `write`. */
  runAll(write: (text: string) => void): Promise<void>;
}

export function createCleanups(): Cleanups {
  const steps: Array<{ label: string; run: () => Promise<unknown> }> = [];
  return {
    push(label, run) {
      steps.push({ label, run });
    },
    async runAll(write) {
      for (const step of steps.splice(0).reverse()) {
        try {
          await step.run();
        } catch (error) {
          write(`cleanup of ${step.label} failed: ${error instanceof Error ? error.message : String(error)}\n`);
        }
      }
    },
  };
}
