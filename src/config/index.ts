/**
 * Stage `config/`: the assembler's configuration, parsed once at start-up with zod.
 *
 * ```ts
 * // assembler.config.ts
 * import { defineConfig } from 'event-assembler';
 * import { mappers } from './mappers/index.js';
 * export default defineConfig({
 *   name: 'invoicing',
 *   source: { connection: 'env:CAPTURE_DATABASE_URL', slot: 'invoicing', publication: 'invoicing' },
 *   destination: { connectionString: 'env:KURRENTDB_URL' },
 *   mappers,
 *   contracts: { dir: 'contracts/invoicing' },
 * });
 * ```
 *
 * `defineConfig` only types the object; `parseConfig` (called by `createAssembler`) validates it,
 * resolves `env:` secrets and fills defaults, throwing one {@link ConfigError} that lists every
 * problem found (field, problem, fix). `loadConfig(file)` imports a `.ts`/`.js`/`.mjs` config module.
 */
export {
  defineConfig,
  parseConfig,
  ConfigError,
  type ConfigErrorDetails,
  SNAPSHOT_MODES_ACCEPTED,
  initialChunkRows,
  incrementalChunkRows,
  type AssemblerConfig,
  type ResolvedConfig,
  type SecretValue,
  type SourceConfig,
  type DestinationConfig,
  type ContractsConfig,
  type SnapshotConfig,
  type FailurePolicyConfig,
  type LimitsConfig,
  type LifecycleConfig,
  type StandbyConfig,
  type ObservabilityConfig,
} from './schema.js';
export { loadConfig, ConfigLoadError } from './load.js';
export { redactConnectionString, createRedactor, type Redactor } from './redact.js';
