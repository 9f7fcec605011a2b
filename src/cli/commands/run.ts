// `event-assembler run`: the main job — capture, map, validate, append, acknowledge — until
// SIGTERM/SIGINT (graceful) or --duration.
import { Command, Option } from 'commander';
import { ConfigError, ConfigLoadError, loadConfig } from '../../config/index.js';
import { EventAssemblerError } from '../../errors.js';
import { onStopSignals } from '../stop-signals.js';
import { createAssembler, createLogger, RebuildNeededError, StartupUnavailableError, type LogFormat } from '../../pipeline/index.js';

interface RunFlags {
  config: string;
  duration?: number;
  logFormat: LogFormat;
}

/** Exit codes of `event-assembler run`. */
export const RUN_EXIT_CODES = {
  stopped: 0,
  fatal: 1,
  config: 2,
  rebuildNeeded: 3,
  unavailable: 4,
} as const;

const HELP = `
The configuration module (.ts, .mts, .js or .mjs; TypeScript needs no build step)
default-exports defineConfig({...}):
  name           the assembler's name: part of event ids; names the streams
                 event-assembler.checkpoint-<name> and event-assembler.failed-<name>
  source         { connection, slot, publication, tables? } — the capture role's
                 connection (use env:VARIABLE, never a literal password), the slot and
                 publication made by \`event-assembler setup\`; tables default to every
                 table the mappers declare
  destination    { connectionString, mode? } — KurrentDB; mode auto (default),
                 multi-stream or per-stream
  mappers        your mappers (defineMapper), in the order they run
  contracts      { dir } — the JSON Schema contracts every event is validated against
  snapshot       { mode: 'never' (default) | 'initial' | 'when_needed' | 'initial_only',
                   chunkSize?, parallelism?, readAhead? }
                 initial: on first start (no slot yet) read every captured table at the
                 new slot's exported snapshot, then stream from its consistent point;
                 progress in KurrentDB (event-assembler.snapshot-<name>), resumed after
                 a crash; an unservable position is refused (exit 3).
                 when_needed: like initial, and when the stored position can no longer be
                 served (slot dropped, wal_status 'lost', slot advanced past the recorded
                 checkpoint, or an interrupted snapshot lost its slot) drop/re-create the
                 slot and read everything again as snapshot generation n+1 — logged as a
                 warning and shown in the run summary (snapshot.action 'new-generation').
                 initial_only: snapshot, then exit 0.
                 Ad hoc snapshots of chosen tables: event-assembler snapshot --help
  failurePolicy  { contractViolation: 'halt' (default) | 'park' }
  limits         { maxInFlightTransactions: 4000, maxInFlightBytes, memoryLimitBytes,
                   maxConcurrentAppends: 4, minConcurrentBatch: 64, maxBatchTransactions: 512,
                   maxBatchEvents: 2048, maxCachedStreams: 100000 }
                 Group commit: transactions that wait while an append is in flight go
                 together in the next one (one atomic multi-stream append), up to
                 maxBatchTransactions / maxBatchEvents; up to maxConcurrentAppends calls
                 run at once on disjoint streams, a second one only with at least
                 minConcurrentBatch transactions (a smaller batch waits for a call to end). Reading pauses at maxInFlightTransactions
                 received and not yet durable. A transaction of more than 1,000 events (a
                 bulk update) is appended in slices of 1,000, in bounded memory: each slice
                 atomic, the transaction not (docs/bulk-transactions.md). maxCachedStreams:
                 stream states kept (0.2–0.3 KB each); beyond it, correct but slower.
  lifecycle      { drainTimeoutMs: 10000, startupTimeoutMs: none }
                 drainTimeoutMs: after a stop, the longest wait for in-flight appends;
                 then exit 0 without acknowledging what is not durable (the slot sends
                 it again). startupTimeoutMs: how long start-up waits for an unreachable
                 PostgreSQL or KurrentDB (one log line per attempt: server, address,
                 reason) before exit 4; default: until stopped.
  standby        { pollIntervalMs: 1000 }
                 while another process streams the slot, how often to ask whether it
                 is free (fixed, no backoff).
  observability  { port, host: '127.0.0.1', heartbeatIntervalMs: 10000,
                   maxFreshnessMs: 60000 } — off unless set. An HTTP listener serving
                 /metrics (Prometheus), /healthz, /readyz, /status.json; port 0 picks a
                 free one (logged: "observability: listening"). A heartbeat written into
                 the WAL every heartbeatIntervalMs measures freshness end to end; /readyz
                 answers 503 once it is older than maxFreshnessMs (docs/operations.md).
                 Without the process: event-assembler status --help

Example (invoicing.config.ts):
  import { defineConfig } from 'event-assembler';
  import { mappers } from './examples/invoicing/index.js';
  export default defineConfig({
    name: 'invoicing',
    source: { connection: 'env:CAPTURE_DATABASE_URL', slot: 'invoicing', publication: 'invoicing' },
    destination: { connectionString: 'env:KURRENTDB_URL' },
    mappers,
    contracts: { dir: 'contracts/invoicing' },
    failurePolicy: { contractViolation: 'park' },
  });

  $ CAPTURE_DATABASE_URL=postgres://capture:...@db/shop \\
    KURRENTDB_URL='kurrentdb://localhost:2113?tls=false' \\
    event-assembler run --config invoicing.config.ts

What happens:
  At start the source checks run (tables, replica identity, slot, publication), the
  checkpoint stream is compared with the slot (a slot ahead of what was recorded, or an
  invalidated slot, means a rebuild — never a silent resume), and one log line says the
  append mode. Each committed transaction is mapped, validated and appended; the slot is
  acknowledged only once a transaction and every earlier one are durable in KurrentDB.
  After a crash the slot re-sends what was not acknowledged and the appender skips what
  is already there: every event ends up exactly once.

  Hot standby: PostgreSQL lets one connection stream a slot, so a second process with the
  same config stands by ("slot … is active for pid … on …: standing by"), polls every
  standby.pollIntervalMs and takes over when the slot frees ("took over the slot after
  N s"); waiting for the slot is not subject to startupTimeoutMs (docs/running.md).

On SIGTERM or SIGINT (and when --duration ends): reading stops, in-flight appends are
drained (for at most lifecycle.drainTimeoutMs, 10 s by default), the durable position is
recorded and acknowledged, connections close, exit 0. A stop during start-up — also while
a server is unreachable — ends the wait at once. A second signal exits at once (nothing
durable is lost: unacknowledged transactions are re-sent on the next start).

Exit codes:
  0  stopped (signal or --duration)
  1  fatal error (mapper or contract failure with policy halt, destination conflict,
     source failure) — the log line says where and why
  2  the configuration could not be loaded or is invalid (the message names the field,
     or the file and line)
  3  rebuild needed: the slot was invalidated, dropped or advanced past what was
     recorded — also after a failover to a standby without a synchronized slot
     (snapshot.mode 'when_needed' starts a new generation instead)
  4  a server stayed unreachable for lifecycle.startupTimeoutMs at start-up
     (SOURCE_UNAVAILABLE: PostgreSQL, DESTINATION_UNAVAILABLE: KurrentDB)
  130/143  a second SIGINT/SIGTERM: exited without draining
`;

function exitCodeOf(error: unknown): number {
  // Also the source's REBUILD_NEEDED: the slot vanished or moved ahead while streaming (a failover without a synchronized slot).
  if (error instanceof RebuildNeededError || (error instanceof EventAssemblerError && error.code === 'REBUILD_NEEDED')) return RUN_EXIT_CODES.rebuildNeeded;
  if (error instanceof ConfigError) return RUN_EXIT_CODES.config;
  if (error instanceof StartupUnavailableError) return RUN_EXIT_CODES.unavailable;
  return RUN_EXIT_CODES.fatal;
}

export function register(program: Command): void {
  program
    .command('run')
    .summary('run the assembler: PostgreSQL changes in, business events appended to KurrentDB')
    .description('Runs the pipeline described by a configuration module until SIGTERM/SIGINT or --duration.')
    .requiredOption('--config <file>', 'configuration module (.ts, .mts, .js, .mjs) that default-exports defineConfig({...})')
    .option('--duration <seconds>', 'stop gracefully after this many seconds', (v: string) => {
      const n = Number(v);
      if (!Number.isFinite(n) || n <= 0) throw new Error(`--duration must be a positive number of seconds, got "${v}"`);
      return n;
    })
    .addOption(new Option('--log-format <format>', 'log lines as JSON or for humans').choices(['json', 'pretty']).default('json'))
    .addHelpText('after', HELP)
    .action(async (flags: RunFlags) => {
      const logger = createLogger({ format: flags.logFormat });
      let assembler;
      try {
        const config = await loadConfig(flags.config);
        assembler = createAssembler(config, { logger });
      } catch (error) {
        if (error instanceof ConfigError || error instanceof ConfigLoadError) {
          logger.error(error.message, { code: error.code, ...error.details });
          process.exitCode = RUN_EXIT_CODES.config;
          return;
        }
        throw error;
      }
      const a = assembler;
      const offSignals = onStopSignals(logger, () => void a.stop(), 'second signal: exiting without draining');
      const timer = flags.duration ? setTimeout(() => void a.stop(), flags.duration * 1000) : null;
      try {
        await a.run();
        process.exitCode = RUN_EXIT_CODES.stopped;
      } catch (error) {
        process.exitCode = exitCodeOf(error);
        if (!(error instanceof EventAssemblerError)) logger.error('unexpected error', { error: error instanceof Error ? { name: error.name, message: error.message, stack: error.stack } : String(error) });
      } finally {
        if (timer) clearTimeout(timer);
        offSignals();
        // Client libraries may keep handles open for a while after close; do not hang the exit.
        setTimeout(() => process.exit(), 5_000).unref();
      }
    });
}
