// `event-assembler teardown --config <file>`: drops a decommissioned assembler's replication slot
// (and with --drop-publication its publications), so it stops pinning WAL. Without --yes it
// prints what it would drop and drops nothing; it never drops a slot that is active.
import { Command, CommanderError, Option } from 'commander';
import { ConfigError, ConfigLoadError, loadConfig, type ResolvedConfig } from '../../config/index.js';
import { EventAssemblerError } from '../../errors.js';
import { checkpointStreamName } from '../../sink/index.js';
import { inspectTeardown, teardownCapture, type TeardownPlan } from '../../source/teardown.js';

interface TeardownFlags {
  config: string;
  source?: string;
  dropPublication?: boolean;
  yes?: boolean;
}

/** Exit codes of `event-assembler teardown`. */
export const TEARDOWN_EXIT_CODES = { done: 0, refused: 1, usage: 2 } as const;

const HELP = `
What it does:
  1. loads the configuration (as run does) for source.slot, source.publication and the
     capture connection (source.connection; --source replaces it);
  2. reads the slot from pg_replication_slots: is it there, is it active (which PID,
     which client), how much WAL it retains;
  3. without --yes: prints what it would drop, drops nothing, exits 1;
     with --yes: drops the slot (pg_drop_replication_slot), and with --drop-publication
     the publication(s) too (DROP PUBLICATION), then exits 0.
It never asks a question, so it runs the same in a terminal and in a script: --yes is the
confirmation. It is idempotent: a slot or publication already gone is reported, not an error.

It refuses (exit 1, nothing dropped):
  - while the slot is active: an assembler (or another client) still streams from it — the
    message names the PID and, where visible, the client. Stop every process of the assembler,
    the leader and its standbys (a standby would take the slot again), then run teardown;
  - when the slot is not this assembler's kind (physical, another output plugin, another
    database);
  - with --drop-publication, when the role may not drop a publication: only its owner (who ran
    setup) or a superuser may — pass that connection with --source.

The publication is kept unless --drop-publication is given: other assemblers may use it.
KurrentDB is not touched: the assembler's streams, its checkpoint stream
(event-assembler.checkpoint-<name>) and its snapshot progress stay. Starting the same assembler
again later is a rebuild: the slot is gone, so it refuses (REBUILD_NEEDED, exit 3) unless
snapshot.mode is 'when_needed', which creates a new slot and snapshot generation.

Exit codes: 0 dropped (or nothing left to drop); 1 refused or failed, or --yes missing — nothing
dropped, the message says why; 2 the configuration could not be loaded, or a usage error.

Examples:
  $ event-assembler teardown --config shop.config.ts                  # what would be dropped
  $ event-assembler teardown --config shop.config.ts --yes            # drop the slot
  $ event-assembler teardown --config shop.config.ts --yes --drop-publication \\
      --source postgres://admin@db:5432/shop                          # and the publication
`;

function bytes(value: string | null): string {
  if (value === null) return 'unknown';
  const n = Number(value);
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${n} bytes` : `${v.toFixed(1)} ${units[i]}`;
}

function describeSlot(plan: TeardownPlan): string {
  const s = plan.slot;
  if (!s.exists) return `slot ${s.name}: does not exist (nothing to drop)`;
  return `slot ${s.name}: inactive, wal_status ${s.walStatus ?? 'unknown'}, retains ${bytes(s.retainedBytes)} of WAL (restart_lsn ${s.restartLsn ?? '-'}, confirmed_flush_lsn ${s.confirmedFlushLsn ?? '-'})`;
}

function printPlan(plan: TeardownPlan, config: ResolvedConfig): void {
  console.log(`teardown of assembler "${config.name}" in database ${plan.database} (as ${plan.role}):`);
  console.log(`  ${describeSlot(plan)}${plan.slot.exists ? ' — would be dropped' : ''}`);
  for (const p of plan.publications) {
    if (!plan.dropPublication) console.log(`  publication ${p.name}: kept${p.exists ? '' : ' (does not exist)'} — --drop-publication drops it`);
    else console.log(`  publication ${p.name}: ${p.exists ? 'would be dropped' : 'does not exist (nothing to drop)'}`);
  }
}

async function teardown(flags: TeardownFlags): Promise<number> {
  let config: ResolvedConfig;
  try {
    config = await loadConfig(flags.config);
  } catch (error) {
    if (error instanceof ConfigError || error instanceof ConfigLoadError) {
      console.error(`teardown failed [${error.code}]: ${error.message}`);
      return TEARDOWN_EXIT_CODES.usage;
    }
    throw error;
  }
  const options = { connection: flags.source ?? config.source.connection, slot: config.source.slot, publications: config.source.publication, dropPublication: flags.dropPublication === true };
  try {
    if (!flags.yes) {
      printPlan(await inspectTeardown(options), config);
      console.log('nothing dropped: teardown drops only with --yes');
      return TEARDOWN_EXIT_CODES.refused;
    }
    const report = await teardownCapture(options);
    console.log(`teardown of assembler "${config.name}" in database ${report.plan.database} (as ${report.plan.role}):`);
    console.log(report.slotDropped ? `  slot ${config.source.slot}: dropped (it retained ${bytes(report.plan.slot.retainedBytes)} of WAL)` : `  ${describeSlot(report.plan)}`);
    for (const p of report.plan.publications) {
      if (report.publicationsDropped.includes(p.name)) console.log(`  publication ${p.name}: dropped`);
      else if (!p.exists) console.log(`  publication ${p.name}: does not exist`);
      else console.log(`  publication ${p.name}: kept — --drop-publication drops it`);
    }
    for (const sql of report.executed) console.log(`  executed: ${sql}`);
    console.log(`KurrentDB is untouched (${checkpointStreamName(config.name)} and the business streams stay); starting this assembler again is a rebuild (snapshot.mode 'when_needed').`);
    return TEARDOWN_EXIT_CODES.done;
  } catch (error) {
    if (error instanceof EventAssemblerError) {
      console.error(`teardown refused [${error.code}]: ${config.redactor.text(error.message)}`);
      return TEARDOWN_EXIT_CODES.refused;
    }
    console.error(`teardown failed: ${config.redactor.text(error instanceof Error ? error.message : String(error))}`);
    return TEARDOWN_EXIT_CODES.refused;
  }
}

export function register(program: Command): void {
  program
    .command('teardown')
    .summary("drop a decommissioned assembler's replication slot (and publication) so it stops pinning WAL")
    .description("Drops the replication slot of the assembler described by --config — and with --drop-publication its publication(s) — so PostgreSQL stops retaining WAL for it. Prints the plan without --yes; refuses while the slot is active.")
    .requiredOption('--config <file>', "the assembler's configuration module (as for run): which slot and publication, and the capture connection")
    .addOption(new Option('--source <connection>', "connection to use instead of the configuration's source.connection, e.g. the publication owner's for --drop-publication").env('EVENT_ASSEMBLER_SOURCE'))
    .option('--drop-publication', 'drop the publication(s) too (default: keep them; other assemblers may use them)')
    .option('--yes', 'drop for real (without it: print what would be dropped, drop nothing, exit 1)')
    .addHelpText('after', HELP)
    .exitOverride((error: CommanderError) => process.exit(error.exitCode === 0 ? 0 : TEARDOWN_EXIT_CODES.usage))
    .action(async (flags: TeardownFlags) => {
      process.exitCode = await teardown(flags);
    });
}
