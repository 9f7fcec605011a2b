// `event-assembler reconcile --config <file>`: compares the source rows with what the business
// streams say, at one consistent cut, while the line runs (docs/reconcile.md). Read-only.
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { ConfigError, ConfigLoadError, loadConfig, type ResolvedConfig } from '../../config/index.js';
import { EventAssemblerError } from '../../errors.js';
import { formatReconcileProgress, formatReconcileReport } from '../../reconcile/format.js';
import { reconcile, ReconcileError, type ReconcileProgress } from '../../reconcile/index.js';

interface ReconcileFlags {
  config: string;
  tables?: string[];
  sample?: number;
  json?: boolean;
  show: number;
  waitTimeout: number;
  rangeSize: number;
}

/** Exit codes of `event-assembler reconcile`. */
export const RECONCILE_EXIT_CODES = { agreement: 0, differences: 1, usage: 2, failed: 3 } as const;

const HELP = `
How it works (docs/reconcile.md):
  1. the cut: a temporary replication slot with an exported snapshot at LSN L (the capture
     role needs REPLICATION, as for capture); every reconciler's table is read at that
     snapshot, so exactly the transactions committed before L;
  2. waits until the assembler's checkpoint (event-assembler.checkpoint-<name>) is at or past
     L (--wait-timeout), so everything before L is durable in KurrentDB;
  3. reads each table once (COPY, ordered by key, only the reconciler's columns — a mapper must
     allowlist each) and the entity streams once ($all filtered by the reconcilers' stream
     prefixes), folding only events before L (a snapshot record's at or before L);
  4. compares key range by key range: a hash of each side first, entities only where the
     hashes differ, in bounded memory (--range-size entities at a time; spill files in the
     OS temp directory, removed afterwards).

What it reports, per reconciler and entity by entity (the first --show of each kind):
  missing            a source row whose entity has no events in the cut
  different          both present; the fields that differ (masked where the reconciler says)
  extra              the events say the entity is alive; no source row (and no delete event)
  deleted but alive  the events say deleted; the source row is there
The recovery for each is in docs/runbook.md, "Reconciliation found differences".

Examples:
  $ event-assembler reconcile --config invoicing.config.ts
  $ event-assembler reconcile --config invoicing.config.ts --tables public.invoice --json | jq .summaries
  $ event-assembler reconcile --config invoicing.config.ts --sample 1000

Exit codes:
  0  agreement
  1  differences found (the report lists them)
  2  usage: bad flags, the configuration could not be loaded, is invalid or has no reconcilers
  3  could not reconcile: PostgreSQL or KurrentDB unreachable, the assembler's checkpoint did
     not pass the cut in time, a reconciler's function threw (the message says which)
`;

function positive(name: string) {
  return (text: string): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive whole number`);
    return n;
  };
}

function list(text: string, previous: string[] = []): string[] {
  return [...previous, ...text.split(',').map((t) => t.trim()).filter((t) => t !== '')];
}

async function configOrExit(file: string): Promise<ResolvedConfig | null> {
  try {
    const config = await loadConfig(file);
    if (config.reconcilers.length > 0) return config;
    console.error(`${file}: the configuration defines no reconcilers — add reconcilers: [defineReconciler({ table, columns, streamPrefix, stream, expected, fold })] (docs/reconcile.md)`);
  } catch (error) {
    if (!(error instanceof ConfigError || error instanceof ConfigLoadError)) throw error;
    console.error(error.message);
  }
  process.exitCode = RECONCILE_EXIT_CODES.usage;
  return null;
}

function progressWriter(): ((p: ReconcileProgress) => void) | undefined {
  if (!process.stderr.isTTY) return undefined;
  let last = 0;
  return (p) => {
    const now = Date.now();
    if (now - last < 100 && p.done !== p.total) return;
    last = now;
    process.stderr.write(`\r\x1b[2K${formatReconcileProgress(p)}`);
  };
}

export function register(program: Command): void {
  program
    .command('reconcile')
    .summary('compare the source rows with what the business streams say, at one consistent cut, while the line runs')
    .description('Takes a consistent cut of the source, waits for the assembler to pass it, and compares every reconciler\'s table with the folded events of its entity streams.')
    .requiredOption('--config <file>', 'configuration module (.ts, .mts, .js, .mjs) that default-exports defineConfig({...}) with reconcilers: [...]')
    .option('--tables <names>', 'only these reconcilers, by name or table (comma-separated, repeatable)', list)
    .option('--sample <rows>', 'a quick statistical check: about this many random rows per table (extras are not looked for)', positive('--sample'))
    .option('--json', 'print the report as one JSON document')
    .option('--show <n>', 'entities listed per kind of difference', positive('--show'), 20)
    .option('--wait-timeout <seconds>', 'longest wait for the assembler to pass the cut', positive('--wait-timeout'), 60)
    .option('--range-size <entities>', 'entities per key range (held in memory at once)', positive('--range-size'), 50_000)
    .addHelpText('after', HELP)
    // A bad flag is a usage error (2), not a difference (1).
    .exitOverride((error: CommanderError) => process.exit(error.exitCode === 0 ? 0 : RECONCILE_EXIT_CODES.usage))
    .action(async (flags: ReconcileFlags) => {
      const config = await configOrExit(flags.config);
      if (!config) return;
      const onProgress = flags.json ? undefined : progressWriter();
      try {
        const report = await reconcile({
          assembler: config.name,
          source: { connection: config.source.connection, publications: config.source.publication },
          destination: { connectionString: config.destination.connectionString },
          reconcilers: config.reconcilers,
          ...(flags.tables ? { only: flags.tables } : {}),
          ...(flags.sample !== undefined ? { sample: flags.sample } : {}),
          show: flags.show,
          waitTimeoutMs: flags.waitTimeout * 1000,
          rangeSize: flags.rangeSize,
          ...(onProgress ? { onProgress } : {}),
        });
        if (onProgress) process.stderr.write('\r\x1b[2K');
        process.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : formatReconcileReport(report));
        process.exitCode = report.ok ? RECONCILE_EXIT_CODES.agreement : RECONCILE_EXIT_CODES.differences;
      } catch (error) {
        if (onProgress) process.stderr.write('\r\x1b[2K');
        const usage = error instanceof ReconcileError && error.code === 'RECONCILE_UNKNOWN_RECONCILER';
        // Ours say what to do; anything else (a driver's error) is shown with where it came from.
        const text = error instanceof EventAssemblerError ? error.message : String((error as Error)?.stack ?? error);
        console.error(config.redactor.text(`reconcile: ${text}`));
        process.exitCode = usage ? RECONCILE_EXIT_CODES.usage : RECONCILE_EXIT_CODES.failed;
      }
    });
}
