// `event-assembler snapshot --tables …`: plans an ad hoc snapshot of chosen tables as a new
// generation and prints what the running pipeline will do. Until the pipeline exists it only
// prints (no connection is made); with --progress-file it also shows a stored snapshot's state.
import { Command } from 'commander';
import { EventAssemblerError } from '../../errors.js';
import { adHocSnapshotProgress, createFileProgressStore, formatProgressLine, isSnapshotFinished } from '../../source/snapshot/index.js';

interface SnapshotFlags {
  tables: string[];
  captured?: string[];
  lastGeneration?: string;
  progressFile?: string;
  chunkSize: string;
  json?: boolean;
}

function parseList(value: string, previous: string[] = []): string[] {
  return [...previous, ...value.split(',').map((t) => t.trim()).filter(Boolean)];
}

const HELP = `
What it will do (once the pipeline runs it; today this prints the plan only):
  1. start snapshot generation <last + 1> of kind ad_hoc for --tables;
  2. keep streaming, and read each table in primary-key chunks of --chunk-size rows,
     each chunk between a low and a high watermark written into the WAL with
     pg_logical_emit_message (no extra privilege in PostgreSQL 17);
  3. emit each chunk's rows as 'read' records right after its high watermark, minus rows
     the stream changed inside the window;
  4. save progress after each durable chunk; an interrupted snapshot resumes after it.
See docs/snapshots.md.

Examples:
  $ event-assembler snapshot --tables public.invoice --last-generation 2
  $ event-assembler snapshot --tables public.invoice --progress-file ./snapshot.json --json
`;

export function register(program: Command): void {
  program
    .command('snapshot')
    .summary('plan an ad hoc snapshot of chosen tables as a new generation')
    .description('Re-reads chosen tables while streaming, as a new snapshot generation (incremental, resumable).')
    .requiredOption('--tables <list>', 'comma-separated schema-qualified tables, e.g. public.invoice (repeatable)', parseList)
    .option('--captured <list>', 'tables the assembler captures (default: --tables)', parseList)
    .option('--last-generation <generation>', 'the latest snapshot generation (default: none, so the new one is 1)')
    .option('--progress-file <file>', 'show the snapshot progress stored in this file')
    .option('--chunk-size <rows>', 'rows per chunk', '1024')
    .option('--json', 'print the plan as JSON')
    .addHelpText('after', HELP)
    .action(async (flags: SnapshotFlags, command: Command) => {
      const chunkSize = Number(flags.chunkSize);
      if (!Number.isInteger(chunkSize) || chunkSize < 1) command.error(`--chunk-size "${flags.chunkSize}" must be a positive integer`);
      try {
        if (flags.progressFile) {
          const stored = await createFileProgressStore(flags.progressFile).load();
          if (stored === null) console.log(`no snapshot progress stored in ${flags.progressFile}`);
          else {
            console.log(`stored snapshot: generation ${stored.generation} (${stored.kind}), ${isSnapshotFinished(stored) ? 'finished' : 'unfinished'}: ${stored.reason}`);
            for (const t of stored.tables) console.log(`  ${formatProgressLine(t, { rowsPerSecond: null })}`);
          }
        }
        const lastGeneration = flags.lastGeneration ?? null;
        const plan = adHocSnapshotProgress({ tables: flags.tables, capturedTables: flags.captured ?? flags.tables, lastGeneration });
        if (flags.json) {
          console.log(JSON.stringify({ action: 'ad-hoc-snapshot', chunkSize, dryRun: true, progress: plan }, null, 2));
          return;
        }
        console.log(`would start snapshot generation ${plan.generation} (ad_hoc) of ${plan.tables.map((t) => t.table).join(', ')} in chunks of ${chunkSize} rows while streaming`);
        console.log('dry run: the running pipeline performs it; nothing was changed');
      } catch (error) {
        if (error instanceof EventAssemblerError) {
          console.error(`snapshot failed [${error.code}]: ${error.message}`);
          process.exitCode = 1;
          return;
        }
        throw error;
      }
    });
}
