// The consumer kit against a plain loop, on the same events in the same run:
//
//   npm run bench:consumer                                          # 20,000 events, batches 1, 100, 500
//   EA_BENCH_CONSUMER_EVENTS=5000 EA_BENCH_CONSUMER_BATCH=100 npm run bench:consumer
//
// 1. The in-memory KurrentDB (a process of its own) gets EA_BENCH_CONSUMER_EVENTS (default 20,000)
//    ledger events — deposits and withdrawals over EA_BENCH_CONSUMER_ACCOUNTS (default 1,000)
//    accounts, EA_BENCH_CONSUMER_PER_TX (default 4) per source transaction — mapped by a real
//    mapper and appended by the real sink, so their metadata is the assembler's (bench/lib/ledger-events.ts).
// 2. For each batch size in EA_BENCH_CONSUMER_BATCH (default "1,100,500") and each of
//    EA_BENCH_CONSUMER_ROUNDS rounds (default 2), both consumers apply every event to a fresh
//    accounts table in an embedded PostgreSQL 17 (bench/lib/consumer-runs.ts): the kit
//    (`createProjectionRunner`: receipts, entity versions, compare-and-set checkpoint) and a plain
//    loop (the same `$all` catch-up subscription, the same UPDATEs in transactions of the same
//    size, no receipts, no checkpoint). Kit first in odd rounds, plain first in even ones, after
//    an unrecorded warm-up run of each. Each run's balances are checked against the ledger.
//
// The kit runs from the production build (`.tmp/bench-build`, as npm run bench:consumer builds it;
// EA_BENCH_FROM=src for the sources through tsx). Prints a markdown table and writes
// bench/results/<date>-consumer.md.
import os from 'node:os';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/testing/postgres.js';
import { checkBalances, prepareAccounts, runKit, runPlain, type ConsumerRun, type StatementProfile } from './lib/consumer-runs.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { writeLedger } from './lib/ledger-events.js';
import { gitCommit, writeResult } from './lib/results.js';
import { FROM } from './lib/subject.js';

const EVENTS = Number(process.env.EA_BENCH_CONSUMER_EVENTS ?? 20_000);
const ACCOUNTS = Number(process.env.EA_BENCH_CONSUMER_ACCOUNTS ?? 1_000);
const PER_TX = Number(process.env.EA_BENCH_CONSUMER_PER_TX ?? 4);
const BATCHES = (process.env.EA_BENCH_CONSUMER_BATCH ?? '1,100,500').split(',').map(Number).filter((n) => n > 0);
const ROUNDS = Number(process.env.EA_BENCH_CONSUMER_ROUNDS ?? 2);
/** One more kit run per batch size after the rounds, every statement timed (not in the table: the timing wraps each query). */
const PROFILE = process.env.EA_BENCH_CONSUMER_PROFILE === '1';

type Kind = 'kit' | 'plain';
interface Measured extends ConsumerRun {
  readonly kind: Kind;
  readonly batch: number;
  readonly round: number;
  readonly order: number;
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const log = (line: string) => console.error(`[bench:consumer ${new Date().toISOString().slice(11, 19)}] ${line}`);

// Before anything of the bench starts: figures are for a quiet machine (load below 0.5).
const loadAtStart = os.loadavg();
const server = await startEmbeddedPostgres();
const kurrent = await startKurrentDBProcess(0);
const kurrentdb = `${kurrent.connectionString}&discoveryInterval=50`;
const runs: Measured[] = [];
const profiles: { batch: number; run: ConsumerRun; profile: StatementProfile }[] = [];
let written: Awaited<ReturnType<typeof writeLedger>> | null = null;
try {
  await server.query('CREATE DATABASE bench_consumer');
  const postgres = server.connectionString({ database: 'bench_consumer' });
  const admin = new pg.Pool({ connectionString: postgres, max: 1 });
  try {
    written = await writeLedger(kurrent.connectionString, EVENTS, ACCOUNTS, PER_TX);
    log(`wrote ${fmt(written.events)} events in ${fmt(written.transactions)} source transactions in ${written.seconds.toFixed(1)} s`);
    // Warm-up, not recorded: whichever consumer ran first would otherwise pay for the JIT of the
    // client's decoding and of pg (measured: the kit first in round 1 at 0.41 of plain, second in round 2 at 0.92).
    const warm = Math.max(...BATCHES);
    for (const kind of ['kit', 'plain'] as const) {
      await prepareAccounts(admin, `warmup_${kind}`, ACCOUNTS);
      const run = await (kind === 'kit' ? runKit : runPlain)(postgres, kurrentdb, `warmup_${kind}`, warm, written.events);
      log(`warm-up, batch ${warm}, ${kind}: ${run.seconds.toFixed(2)} s (not recorded)`);
    }
    let order = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const batch of BATCHES) {
        const kinds: Kind[] = round % 2 === 1 ? ['kit', 'plain'] : ['plain', 'kit'];
        for (const kind of kinds) {
          const schema = `${kind}_b${batch}_r${round}`;
          await prepareAccounts(admin, schema, ACCOUNTS);
          const run = await (kind === 'kit' ? runKit : runPlain)(postgres, kurrentdb, schema, batch, written.events);
          await checkBalances(admin, schema, written.expected);
          runs.push({ ...run, kind, batch, round, order: ++order });
          log(`round ${round}, batch ${batch}, ${kind}: ${run.seconds.toFixed(2)} s, ${fmt(run.events / run.seconds)} events/s (${fmt(run.batches)} transactions, ${fmt(run.cpuPerEvent)} µs CPU/event; balances checked)`);
        }
      }
    }
    for (const batch of PROFILE ? BATCHES : []) {
      const schema = `profile_b${batch}`;
      await prepareAccounts(admin, schema, ACCOUNTS);
      const profile: StatementProfile = new Map();
      const run = await runKit(postgres, kurrentdb, schema, batch, written.events, profile);
      await checkBalances(admin, schema, written.expected);
      profiles.push({ batch, run, profile });
      log(`profiled kit, batch ${batch}: ${run.seconds.toFixed(2)} s`);
    }
  } finally {
    await admin.end();
  }
} finally {
  await kurrent.stop();
  await server.destroy();
}

const rate = (r: ConsumerRun) => r.events / r.seconds;
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const range = (xs: readonly number[], digits = 0) => `${fmt(Math.min(...xs), digits)}–${fmt(Math.max(...xs), digits)}`;
const summary = BATCHES.map((batch) => {
  const kit = runs.filter((r) => r.batch === batch && r.kind === 'kit').map(rate);
  const plain = runs.filter((r) => r.batch === batch && r.kind === 'plain').map(rate);
  // A ratio per round: the kit against the plain loop it ran next to.
  const ratios = [...new Set(runs.map((r) => r.round))].map((round) => {
    const k = runs.find((r) => r.batch === batch && r.round === round && r.kind === 'kit')!;
    const p = runs.find((r) => r.batch === batch && r.round === round && r.kind === 'plain')!;
    return rate(k) / rate(p);
  });
  const cpuOf = (kind: Kind) => mean(runs.filter((r) => r.batch === batch && r.kind === kind).map((r) => r.cpuPerEvent));
  return { batch, kit, plain, ratio: mean(kit) / mean(plain), ratios, cpuKit: cpuOf('kit'), cpuPlain: cpuOf('plain') };
});
const table = [
  '| batch (events per PostgreSQL transaction) | kit events/s (mean; runs) | plain loop events/s (mean; runs) | kit / plain (means) | kit / plain per round | CPU µs/event of the consumer process, kit / plain | target ≥ 0.7 |',
  '|---:|---:|---:|---:|---:|---:|---|',
  ...summary.map(
    (s) =>
      `| ${fmt(s.batch)} | ${fmt(mean(s.kit))} (${range(s.kit)}) | ${fmt(mean(s.plain))} (${range(s.plain)}) | ${s.ratio.toFixed(2)} | ${s.ratios.map((r) => r.toFixed(2)).join(', ')} | ${fmt(s.cpuKit)} / ${fmt(s.cpuPlain)} | ${s.batch === 1 ? '(no batching)' : s.ratio >= 0.7 ? 'met' : 'not met'} |`,
  ),
].join('\n');
const detail = [
  '| # | round | batch | consumer | seconds | events/s | transactions | CPU µs/event |',
  '|---:|---:|---:|---|---:|---:|---:|---:|',
  ...runs.map((r) => `| ${r.order} | ${r.round} | ${fmt(r.batch)} | ${r.kind} | ${r.seconds.toFixed(2)} | ${fmt(rate(r))} | ${fmt(r.batches)} | ${fmt(r.cpuPerEvent)} |`),
].join('\n');

const profileText = profiles
  .map(({ batch, run, profile }) => {
    const rows = [...profile.entries()].sort((a, b) => b[1].ms - a[1].ms);
    const total = rows.reduce((a, [, v]) => a + v.ms, 0);
    return [
      `Kit, batch ${fmt(batch)}: ${run.seconds.toFixed(2)} s for ${fmt(run.events)} events (${fmt(rate(run))} events/s with every query timed), ${fmt(run.batches)} transactions; time inside queries ${fmt(total)} ms.`,
      '',
      '| statement | count | per transaction | total ms | µs each |',
      '|---|---:|---:|---:|---:|',
      ...rows.map(([key, v]) => `| \`${key.replaceAll('|', '\\|')}\` | ${fmt(v.count)} | ${(v.count / run.batches).toFixed(1)} | ${fmt(v.ms)} | ${fmt((1000 * v.ms) / v.count)} |`),
    ].join('\n');
  })
  .join('\n\n');
const defaults = EVENTS === 20_000 && ACCOUNTS === 1_000 && PER_TX === 4 && BATCHES.join(',') === '1,100,500' && ROUNDS === 2;
const env = [
  EVENTS !== 20_000 && `EA_BENCH_CONSUMER_EVENTS=${EVENTS}`,
  ACCOUNTS !== 1_000 && `EA_BENCH_CONSUMER_ACCOUNTS=${ACCOUNTS}`,
  PER_TX !== 4 && `EA_BENCH_CONSUMER_PER_TX=${PER_TX}`,
  BATCHES.join(',') !== '1,100,500' && `EA_BENCH_CONSUMER_BATCH=${BATCHES.join(',')}`,
  ROUNDS !== 2 && `EA_BENCH_CONSUMER_ROUNDS=${ROUNDS}`,
  PROFILE && 'EA_BENCH_CONSUMER_PROFILE=1',
  FROM === 'src' && 'EA_BENCH_FROM=src',
].filter(Boolean);
const cpus = os.cpus();
const now = new Date();
const report = `# Consumer kit against a plain loop

Command (from the repository root):

\`\`\`bash
${defaults && FROM === 'build' && !PROFILE ? 'npm run bench:consumer' : `${env.join(' ')} npm run bench:consumer`}
\`\`\`

Machine: ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown'}; Node ${process.version} (${process.execArgv.filter((a) => a.startsWith('--') && !a.startsWith('--import')).join(' ') || 'no flags'}), the kit from ${FROM === 'build' ? 'the production build' : 'the sources through tsx'}; load average at the start ${loadAtStart.map((l) => l.toFixed(2)).join(' / ')}, at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}.
Run at ${now.toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${gitCommit()}.

${fmt(written?.events ?? 0)} events (${fmt(written?.transactions ?? 0)} source transactions of ${PER_TX} on distinct accounts, ${fmt(ACCOUNTS)} accounts, 70 % deposits) written through the real sink into the in-memory KurrentDB (its own process); embedded PostgreSQL 17 with the rig's settings (\`fsync = off\`, \`synchronous_commit = on\`). Each run applies every event to a fresh accounts table by \`UPDATE … SET balance = balance + $1\`, timed from the first event handed to a handler to the last batch committed; its balances are then checked against the ledger. Kit: \`createProjectionRunner\` with receipts, entity versions and the compare-and-set checkpoint (a fresh state schema per run). Plain: the same filtered \`$all\` catch-up subscription, the same UPDATEs, BEGIN/COMMIT per batch, nothing else. Kit first in odd rounds, plain first in even ones, after one unrecorded warm-up run of each at the largest batch size.

${table}

Every run, in the order they ran:

${detail}
${profiles.length === 0 ? '' : `\n## Where the kit's time goes (EA_BENCH_CONSUMER_PROFILE=1: one more kit run per batch size, every query's round trip timed)\n\n${profileText}\n`}`;
console.log(report);
log(`written ${writeResult('consumer', report, now)}`);
