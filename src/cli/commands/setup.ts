// `event-assembler setup`: creates or checks the publication and the logical slot, and
// prints the SQL of a least-privilege capture role.
import { Command, Option } from 'commander';
import { captureRoleSql, createSlotSql, setupCapture, setupSql } from '../../source/setup.js';
import { EventAssemblerError } from '../../errors.js';

interface SetupFlags {
  source?: string;
  publication: string;
  slot: string;
  tables: string[];
  role?: string;
  printSql?: boolean;
  updatePublication?: boolean;
  createSlot: boolean;
  failover: boolean;
}

function parseTables(value: string, previous: string[] = []): string[] {
  return [...previous, ...value.split(',').map((t) => t.trim()).filter(Boolean)];
}

const HELP = `
What it does:
  1. checks that every --tables entry exists;
  2. creates the publication FOR TABLE exactly those tables (publish insert, update,
     delete, truncate) — or checks that an existing one has exactly them;
  3. creates the logical replication slot with the pgoutput plugin — on PostgreSQL 17+
     a failover slot (failover = true; --no-failover to opt out) — or checks that the
     existing one is logical, pgoutput, of this database, and not invalidated; says
     whether it is failover-safe;
  4. prints the SQL for a least-privilege capture role when --role is given.
It is idempotent: running it again reports "unchanged" / "exists".

Run it as an administrator (the tables' owner or a superuser): creating a publication
needs ownership of its tables. Capture itself should then run as the role printed by
--role, which has only LOGIN, REPLICATION and SELECT on the captured tables.

A slot retains WAL until capture acknowledges it: create the slot when capture is about
to run, and drop it (event-assembler teardown --config … --yes) if you abandon it.
Consider max_slot_wal_keep_size so a stuck slot cannot fill the disk; an invalidated
slot means a rebuild (new slot, new snapshot generation), never a silent restart.

Examples:
  $ event-assembler setup --source postgres://admin@db/shop \\
      --publication shop_events --slot shop_assembler \\
      --tables public.invoice,public.invoice_line --role shop_capture
  $ event-assembler setup --publication shop_events --slot shop_assembler \\
      --tables public.invoice --role shop_capture --print-sql   # no connection made
`;

export function register(program: Command): void {
  program
    .command('setup')
    .summary('create or check the publication and replication slot; print capture-role SQL')
    .description('Prepares a PostgreSQL database for capture: the publication (exactly the captured tables) and the logical replication slot (pgoutput).')
    .addOption(new Option('--source <connection>', 'administrator connection string, e.g. postgres://admin@host:5432/db').env('EVENT_ASSEMBLER_SOURCE'))
    .requiredOption('--publication <name>', 'publication to create or check')
    .requiredOption('--slot <name>', 'logical replication slot to create or check ([a-z0-9_], at most 63 characters)')
    .requiredOption('--tables <list>', 'comma-separated schema-qualified tables, e.g. public.invoice,public.invoice_line (repeatable)', parseTables)
    .option('--role <name>', 'print the SQL for a least-privilege capture role with this name')
    .option('--print-sql', 'print the SQL setup would run (and the role SQL) without connecting')
    .option('--update-publication', 'when the publication exists with other tables, change it to exactly --tables')
    .option('--no-create-slot', 'only check the slot; do not create it')
    .option('--no-failover', 'create the slot without failover = true (by default PostgreSQL 17+ gets a failover slot, kept by standbys with sync_replication_slots; docs/failover.md)')
    .addHelpText('after', HELP)
    .action(async (flags: SetupFlags, command: Command) => {
      if (!/^[a-z0-9_]{1,63}$/.test(flags.slot)) command.error(`--slot "${flags.slot}" is not a valid slot name: use lower-case letters, digits and _ (at most 63)`);
      if (flags.tables.length === 0) command.error('--tables needs at least one schema-qualified table');
      for (const t of flags.tables) if (t.split('.').length !== 2) command.error(`--tables entry "${t}" must be schema-qualified, e.g. public.${t}`);
      const roleSql = flags.role ? captureRoleSql({ role: flags.role, tables: flags.tables }) : null;
      if (flags.printSql) {
        console.log('-- Setup (run as the tables\' owner or a superuser):');
        const [publicationSql, slotSql] = setupSql(flags);
        console.log(publicationSql);
        if (flags.failover) {
          console.log(`${slotSql}  -- PostgreSQL 17+: a failover slot (docs/failover.md)`);
          console.log(`-- before PostgreSQL 17 (no failover slots): ${createSlotSql(flags.slot)}`);
        } else console.log(slotSql);
        if (roleSql) console.log(`\n${roleSql}`);
        return;
      }
      if (!flags.source) command.error('--source (or EVENT_ASSEMBLER_SOURCE) is required unless --print-sql is given');
      try {
        const report = await setupCapture({
          connection: flags.source as string,
          publication: flags.publication,
          slot: flags.slot,
          tables: flags.tables,
          updatePublication: flags.updatePublication === true,
          createSlot: flags.createSlot,
          failover: flags.failover,
        });
        for (const line of report.lines) console.log(line);
        for (const sql of report.executed) console.log(`  executed: ${sql}`);
        if (roleSql) console.log(`\n${roleSql}`);
      } catch (error) {
        if (error instanceof EventAssemblerError) {
          console.error(`setup failed [${error.code}]: ${error.message}`);
          process.exitCode = 1;
          return;
        }
        throw error;
      }
    });
}
