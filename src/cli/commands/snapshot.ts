// `event-assembler snapshot --config <file> --tables …`: asks the running assembler for an ad hoc
// snapshot of chosen tables as a new generation. The request is a transactional logical decoding
// message in the WAL (source/snapshot/request.ts), so it is durable at once and reaches the
// assembler through its slot — also when the assembler is down at the time. With --wait the
// command follows the generation's progress (stored in KurrentDB) until it is done. Without
// --config (or with --dry-run) it only prints the plan.
import { connectSource } from '../../source/connect-source.js';
import { Command } from 'commander';
import os from 'node:os';
import { ConfigError, ConfigLoadError, incrementalChunkRows, loadConfig, type ResolvedConfig } from '../../config/index.js';
import { EventAssemblerError } from '../../errors.js';
import { createKurrentDBSnapshotStore, findRequestedProgress, snapshotProgressStreamName, type StoredSnapshotState } from '../../pipeline/snapshot-store.js';
import {
  adHocSnapshotProgress, createFileProgressStore, createProgressReporter, describeTable, emitSnapshotRequest, formatProgressLine, isSnapshotFinished,
  newSnapshotRequest, nextGeneration, requireKey, SnapshotError, SNAPSHOT_REQUEST_PREFIX, type SnapshotProgress,
} from '../../source/snapshot/index.js';

interface SnapshotFlags {
  tables: string[];
  config?: string;
  dryRun?: boolean;
  wait?: boolean;
  timeout?: string;
  progressInterval: string;
  captured?: string[];
  lastGeneration?: string;
  progressFile?: string;
  chunkSize: string;
  json?: boolean;
}

/** Exit codes of `event-assembler snapshot`. */
export const SNAPSHOT_EXIT_CODES = { ok: 0, failed: 1, config: 2 } as const;

function parseList(value: string, previous: string[] = []): string[] {
  return [...previous, ...value.split(',').map((t) => t.trim()).filter(Boolean)];
}

const HELP = `
What it does (with --config):
  1. checks the tables: schema-qualified, captured by the assembler (config source.tables),
     present, with a primary key; and that the assembler's slot exists;
  2. writes the request into the WAL as a transactional logical decoding message
     (pg_logical_emit_message(true, '${SNAPSHOT_REQUEST_PREFIX}', …), as the capture
     role of the config: no extra privilege in PostgreSQL 17) and prints its LSN — a request
     made while the assembler is down waits in the slot until the assembler runs;
  3. the running assembler reads it in its stream and starts snapshot generation <last + 1>
     (kind ad_hoc) of those tables while it keeps streaming: primary-key chunks between a low
     and a high watermark; each chunk's rows become 'read' records right after its high
     watermark, minus rows the stream changed inside the window; progress is saved in
     KurrentDB (event-assembler.snapshot-<name>) after each durable chunk, so a crash resumes
     after it. A request that arrives while a snapshot runs is queued and starts after it;
  4. with --wait, follows that progress until the generation is done: a progress bar per
     table on a terminal (rows done/estimated, rate, ETA), one JSON line per table every
     --progress-interval seconds otherwise.
Publication row filters and column lists apply to the reads. See docs/snapshots.md.

Exit codes: 0 requested (or, with --wait, done); 1 refused or failed (the message says
why; with --wait also: the timeout passed — the snapshot itself goes on); 2 the
configuration could not be loaded.

Examples:
  $ event-assembler snapshot --config invoicing.config.ts --tables public.invoice --wait
  $ event-assembler snapshot --config invoicing.config.ts --tables public.invoice,public.payment
  $ event-assembler snapshot --config invoicing.config.ts --tables public.invoice --dry-run
  $ event-assembler snapshot --tables public.invoice --last-generation 2      (plan only, offline)
`;

function describeStored(stored: StoredSnapshotState | null): string {
  if (!stored) return 'no snapshot stored yet';
  const p = stored.progress;
  return `latest snapshot: generation ${p.generation} (${p.kind}), ${isSnapshotFinished(p) ? 'finished' : 'running or interrupted'}${stored.requests.queued.length > 0 ? `; ${stored.requests.queued.length} request(s) queued` : ''}`;
}

async function checkSource(config: ResolvedConfig, tables: readonly string[]): Promise<void> {
  const client = await connectSource(config.source.connection);
  try {
    for (const table of tables) requireKey(await describeTable(client, table, { publications: config.source.publication }));
    const slot = await client.query('SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1', [config.source.slot]);
    if (slot.rows.length === 0) {
      throw new SnapshotError('SNAPSHOT_SLOT_MISSING', `replication slot "${config.source.slot}" does not exist, so no assembler would ever read the request; start the assembler (or run event-assembler setup) first`, { slot: config.source.slot });
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Follows the request's generation in the progress stream until it is done (or refused, or the timeout passes). */
async function follow(config: ResolvedConfig, requestId: string, options: { timeoutMs: number | null; intervalMs: number }): Promise<SnapshotProgress> {
  const store = createKurrentDBSnapshotStore(config.destination.connectionString, config.name);
  const reporter = createProgressReporter({ output: process.stderr, ...(process.stderr.isTTY ? {} : { intervalMs: options.intervalMs }) });
  const started = Date.now();
  let said = '';
  const say = (text: string) => {
    if (text !== said) console.error(text);
    said = text;
  };
  try {
    for (;;) {
      const stored = await store.load().catch(() => null);
      const progress = stored?.progress ?? null;
      if (progress?.request?.id === requestId) {
        if (said !== 'started') console.error(`assembler "${config.name}" started ad hoc snapshot generation ${progress.generation} of ${progress.tables.map((t) => t.table).join(', ')}`);
        said = 'started';
        reporter.update(progress);
        if (isSnapshotFinished(progress)) {
          reporter.close();
          return progress;
        }
      } else if (stored?.requests.queued.some((r) => r.id === requestId)) {
        say(`queued: generation ${progress?.generation ?? '?'} is still running; the request starts after it`);
      } else if (stored?.requests.handled.includes(requestId)) {
        // Taken, but not the current generation: it finished and a later one (queued) started, or it was refused.
        const earlier = await findRequestedProgress(config.destination.connectionString, config.name, requestId);
        if (earlier && isSnapshotFinished(earlier)) {
          reporter.update(earlier);
          reporter.close();
          return earlier;
        }
        if (!earlier) {
          throw new SnapshotError('SNAPSHOT_REQUEST_REFUSED', `assembler "${config.name}" refused request ${requestId}; its log line "snapshot: ad hoc snapshot request refused" says why`, { request: requestId });
        }
        throw new SnapshotError('SNAPSHOT_REQUEST_SUPERSEDED', `generation ${earlier.generation} (request ${requestId}) stopped unfinished and generation ${progress?.generation ?? '?'} (${progress?.kind ?? '?'}) replaced it: ${progress?.reason ?? ''}`, { request: requestId });
      } else {
        say(`waiting for assembler "${config.name}" to read the request from slot "${config.source.slot}" (is it running?)`);
      }
      if (options.timeoutMs !== null && Date.now() - started > options.timeoutMs) {
        throw new SnapshotError('SNAPSHOT_WAIT_TIMEOUT', `gave up waiting after ${Math.round(options.timeoutMs / 1000)} s; the request stays in effect (follow it in ${snapshotProgressStreamName(config.name)})`, { request: requestId });
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    await store.close();
  }
}

async function withConfig(flags: SnapshotFlags): Promise<void> {
  let config: ResolvedConfig;
  try {
    config = await loadConfig(flags.config!);
  } catch (error) {
    if (error instanceof ConfigError || error instanceof ConfigLoadError) {
      console.error(`snapshot failed [${error.code}]: ${error.message}`);
      process.exitCode = SNAPSHOT_EXIT_CODES.config;
      return;
    }
    throw error;
  }
  const captured = config.source.tables.map((t) => t.table);
  // Names and membership first (no connection needed), then the database.
  adHocSnapshotProgress({ tables: flags.tables, capturedTables: captured, lastGeneration: null });
  await checkSource(config, flags.tables);
  const store = createKurrentDBSnapshotStore(config.destination.connectionString, config.name);
  let stored: StoredSnapshotState | null = null;
  let storedKnown = true;
  try {
    stored = await store.load();
  } catch {
    storedKnown = false;
  } finally {
    await store.close();
  }
  const running = stored !== null && !isSnapshotFinished(stored.progress);
  const generation = stored ? nextGeneration(stored.progress.generation) : nextGeneration(null);
  const tables = [...new Set(flags.tables)];

  if (flags.dryRun) {
    if (flags.json) {
      console.log(JSON.stringify({ action: 'ad-hoc-snapshot', dryRun: true, assembler: config.name, slot: config.source.slot, tables, generation: storedKnown ? generation : null, queuedBehind: running ? stored!.progress.generation : null }, null, 2));
      return;
    }
    console.log(`would request an ad hoc snapshot of ${tables.join(', ')} from assembler "${config.name}" (slot ${config.source.slot}), read in chunks of ${incrementalChunkRows(config)} rows while streaming`);
    console.log(storedKnown ? `${describeStored(stored)}; it would become generation ${generation}${running ? ' after the running snapshot' : ''}` : `the destination could not be read: the assembler assigns the generation`);
    console.log('dry run: nothing was written');
    return;
  }

  const request = newSnapshotRequest({ assembler: config.name, tables, requestedBy: `${os.userInfo().username}@${os.hostname()}` });
  const client = await connectSource(config.source.connection);
  let lsn: string;
  try {
    lsn = await emitSnapshotRequest(client, request);
  } finally {
    await client.end().catch(() => undefined);
  }
  if (flags.json) console.log(JSON.stringify({ action: 'ad-hoc-snapshot', requested: true, request: request.id, lsn, assembler: config.name, slot: config.source.slot, tables }));
  else {
    console.log(`requested an ad hoc snapshot of ${tables.join(', ')} from assembler "${config.name}": request ${request.id}, WAL message at ${lsn} (slot ${config.source.slot})`);
    console.log(storedKnown ? `${describeStored(stored)}; expected generation: ${running ? `after generation ${stored!.progress.generation} finishes` : generation}` : 'the assembler assigns the generation when it reads the request');
  }
  if (!flags.wait) return;
  const timeoutMs = flags.timeout === undefined ? null : Number(flags.timeout) * 1000;
  const final = await follow(config, request.id, { timeoutMs, intervalMs: Number(flags.progressInterval) * 1000 });
  const rows = final.tables.reduce((n, t) => n + t.rowsDone, 0);
  if (flags.json) console.log(JSON.stringify({ action: 'ad-hoc-snapshot', done: true, request: request.id, generation: final.generation, rows, progress: final }));
  else console.log(`ad hoc snapshot generation ${final.generation} done: ${rows} rows of ${final.tables.map((t) => t.table).join(', ')}`);
}

async function offlinePlan(flags: SnapshotFlags, chunkSize: number): Promise<void> {
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
  console.log('dry run (no --config): nothing was requested; pass --config to ask the running assembler');
}

export function register(program: Command): void {
  program
    .command('snapshot')
    .summary('ad hoc snapshot: re-read chosen tables as a new generation while the assembler streams')
    .description('Asks the running assembler (--config) to re-read chosen tables as a new snapshot generation (incremental, resumable), and with --wait follows it to the end.')
    .requiredOption('--tables <list>', 'comma-separated schema-qualified tables, e.g. public.invoice (repeatable)', parseList)
    .option('--config <file>', "the assembler's configuration module (as for run): whom to ask, and the capture connection that writes the request")
    .option('--wait', 'follow the progress until the generation is done')
    .option('--timeout <seconds>', 'with --wait: give up waiting after this long (exit 1; the snapshot goes on)')
    .option('--progress-interval <seconds>', 'with --wait, not on a terminal: seconds between progress lines', '2')
    .option('--dry-run', 'print the plan; write nothing')
    .option('--json', 'print JSON')
    .option('--captured <list>', 'without --config: tables the assembler captures (default: --tables)', parseList)
    .option('--last-generation <generation>', 'without --config: the latest snapshot generation (default: none, so the new one is 1)')
    .option('--progress-file <file>', 'without --config: show the snapshot progress stored in this file')
    .option('--chunk-size <rows>', 'without --config: rows per chunk for the plan (with --config: snapshot.chunkSize)', '1024')
    .addHelpText('after', HELP)
    .action(async (flags: SnapshotFlags, command: Command) => {
      const chunkSize = Number(flags.chunkSize);
      if (!Number.isInteger(chunkSize) || chunkSize < 1) command.error(`--chunk-size "${flags.chunkSize}" must be a positive integer`);
      if (flags.timeout !== undefined && !(Number(flags.timeout) > 0)) command.error(`--timeout "${flags.timeout}" must be a positive number of seconds`);
      if (!(Number(flags.progressInterval) > 0)) command.error(`--progress-interval "${flags.progressInterval}" must be a positive number of seconds`);
      if (flags.wait && !flags.config) command.error('--wait needs --config (the assembler to follow)');
      try {
        if (flags.config) await withConfig(flags);
        else await offlinePlan(flags, chunkSize);
      } catch (error) {
        if (error instanceof EventAssemblerError) {
          console.error(`snapshot failed [${error.code}]: ${error.message}`);
          process.exitCode = SNAPSHOT_EXIT_CODES.failed;
          return;
        }
        throw error;
      }
    });
}
