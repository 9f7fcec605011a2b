// The assembler under test: the invoicing mappers and contracts, capturing as the capture role,
// with an initial snapshot. Started here, watched for a fatal error, stopped by the cleanups if
// the run ends before its graceful stop.
import { fileURLToPath } from 'node:url';
import { defineConfig } from '../../../config/index.js';
import type { AnyMapper } from '../../../mapping/index.js';
import { createAssembler, createLogger, type Assembler, type RunSummary } from '../../../pipeline/index.js';
import type { Cleanups } from './cleanups.js';
import type { DemoNames } from './names.js';
import type { Progress } from './progress.js';
import { waitFor } from './wait.js';

export const CONTRACTS_DIR = fileURLToPath(new URL('../../../../contracts/invoicing', import.meta.url));

export interface RunningAssembler {
  readonly assembler: Assembler;
  /** What `run()` resolves to after the graceful stop. */
  readonly running: Promise<RunSummary>;
  /** The error the assembler stopped with, if it did. */
  fatal(): unknown;
  /** Aborted when the assembler fails (stops the workload). */
  readonly failed: AbortSignal;
}

export interface AssemblerSettings {
  readonly names: DemoNames;
  readonly capture: string;
  readonly kurrentdb: string;
  readonly mappers: readonly AnyMapper[];
  readonly verbose: boolean;
}

/** Starts the assembler and resolves once its slot exists (its exported snapshot is then fixed, so the workload may start). */
export async function startAssembler(settings: AssemblerSettings, progress: Progress, cleanups: Cleanups, signal: AbortSignal): Promise<RunningAssembler> {
  const { names } = settings;
  const pretty = createLogger({ format: 'pretty', write: (line) => progress.say(line) });
  const assembler = createAssembler(
    defineConfig({
      name: names.assembler,
      source: { connection: settings.capture, slot: names.slot, publication: names.publication, statusIntervalMs: 1_000 },
      destination: { connectionString: settings.kurrentdb },
      mappers: settings.mappers,
      contracts: { dir: CONTRACTS_DIR },
      // The seeded rows exist before the slot: the initial snapshot turns them into snapshot records.
      snapshot: { mode: 'initial' },
    }),
    { logger: { info: settings.verbose ? pretty.info : () => undefined, warn: pretty.warn, error: pretty.error } },
  );
  let fatal: unknown = null;
  const failed = new AbortController();
  const running = assembler.run();
  running.catch((error: unknown) => {
    fatal = error;
    failed.abort();
  });
  cleanups.push('assembler', () => assembler.stop());
  await waitFor(() => (assembler.status().snapshot?.consistentPoint ?? null) !== null || assembler.status().snapshot?.action === 'stream', 'the assembler to create its slot', signal, () => fatal);
  const started = assembler.status();
  progress.say(
    `assembler "${names.assembler}" running: ${started.mode} appends (group commit, up to ${started.concurrentAppends} calls at once); slot ${names.slot} created with an exported snapshot, ` +
      `initial snapshot (generation ${started.snapshot?.generation ?? '?'}) reading, then streaming from ${started.snapshot?.consistentPoint ?? '?'}`,
  );
  return { assembler, running, fatal: () => fatal, failed: failed.signal };
}
