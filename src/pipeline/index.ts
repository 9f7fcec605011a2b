/**
 * Stage `pipeline/`: the wiring of the stages — source → mapping → contracts → sink — with the
 * checkpoint coordinator (what the slot may forget), the failure policy and backpressure.
 *
 * ```ts
 * const assembler = createAssembler(defineConfig({ ... }));
 * process.once('SIGTERM', () => void assembler.stop());
 * const summary = await assembler.run();   // after stop(); rejects on a fatal error
 * ```
 */
export {
  createAssembler,
  type Assembler,
  type AssemblerDeps,
  type AssemblerRole,
  type AssemblerState,
  type AssemblerStatus,
  type RunSummary,
} from './assembler.js';
export { createCheckpointCoordinator, type CheckpointCoordinator, type CoordinatedPosition } from './checkpoint-coordinator.js';
export { createAppender, type Appender, type AppenderOptions } from './appender.js';
export { createLogger, silentLogger, type Logger, type LogFormat, type CreateLoggerOptions } from './logger.js';
export { RebuildNeededError, ContractViolationHaltError, StartupUnavailableError, SourceConnectionError, DestinationConnectionError, type ContractViolationHaltDetails } from './errors.js';
