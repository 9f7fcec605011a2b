// `event-assembler status`: the source-side and checkpoint signals without the running process —
// the slot from pg_replication_slots / pg_stat_replication_slots, the last checkpoint and the
// failed records from KurrentDB — as a table or --json. Read-only.
import { Command } from 'commander';
import { ConfigError, ConfigLoadError, loadConfig } from '../../config/index.js';
import { readOfflineStatus, StatusUnreachableError } from '../../observability/offline-status.js';
import { formatStatus } from './status-output.js';

interface StatusFlags {
  config: string;
  json?: boolean;
}

/** Exit codes of `event-assembler status`. */
export const STATUS_EXIT_CODES = { shown: 0, unreachable: 1, config: 2 } as const;

const HELP = `
What it shows (read-only; works whether the assembler runs or not):
  slot            from pg_replication_slots and pg_stat_replication_slots, over the
                  configuration's source.connection (the capture role may read both):
                  active (and its pid), wal_status (reserved | extended | unreserved |
                  lost), retained WAL (pg_current_wal_lsn() - restart_lsn: what the slot
                  makes PostgreSQL keep), safe WAL size (before the slot is at risk;
                  unlimited when max_slot_wal_keep_size = -1), lag (current position -
                  confirmed_flush_lsn), decoding statistics (spilled / streamed)
  checkpoint      the last record of event-assembler.checkpoint-<name> in KurrentDB:
                  position, when it was recorded, and whether the slot is ahead of it
                  (then the next start refuses with REBUILD_NEEDED)
  failed records  how many records event-assembler.failed-<name> holds, the latest's time

The running process serves the same and more (freshness, positions, throughput) on
/metrics and /status.json when the configuration has observability: { port }
(docs/operations.md).

Examples:
  $ event-assembler status --config invoicing.config.ts
  $ event-assembler status --config invoicing.config.ts --json | jq .slot.retainedWalBytes

Exit codes:
  0  shown
  1  PostgreSQL or KurrentDB could not be read (the message names which, and where)
  2  the configuration could not be loaded or is invalid (the message names the field)
`;

export function register(program: Command): void {
  program
    .command('status')
    .summary("show the slot's retention and state, the last checkpoint and failed records, without the running process")
    .description('Reads the replication slot from PostgreSQL and the checkpoint and failed-records streams from KurrentDB, and prints them.')
    .requiredOption('--config <file>', 'configuration module (.ts, .mts, .js, .mjs) that default-exports defineConfig({...})')
    .option('--json', 'print one JSON document instead of the table')
    .addHelpText('after', HELP)
    .action(async (flags: StatusFlags) => {
      let config;
      try {
        config = await loadConfig(flags.config);
      } catch (error) {
        if (error instanceof ConfigError || error instanceof ConfigLoadError) {
          console.error(error.message);
          process.exitCode = STATUS_EXIT_CODES.config;
          return;
        }
        throw error;
      }
      try {
        const status = await readOfflineStatus({ name: config.name, slot: config.source.slot, connection: config.source.connection, connectionString: config.destination.connectionString });
        process.stdout.write(flags.json ? `${JSON.stringify(status, null, 2)}\n` : formatStatus(status));
        process.exitCode = STATUS_EXIT_CODES.shown;
      } catch (error) {
        if (!(error instanceof StatusUnreachableError)) throw error;
        console.error(config.redactor.text(error.message));
        process.exitCode = STATUS_EXIT_CODES.unreachable;
      }
    });
}
