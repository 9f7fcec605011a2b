// The consumer of the consumer crash test, as a child process the test kills with SIGKILL:
// `node --import tsx test/support/consumer-child.ts`, configured by environment —
//
//   EA_CONSUMER_POSTGRES   connection string of the projection's database
//   EA_CONSUMER_KURRENTDB  connection string of the (in-memory) KurrentDB
//   EA_CONSUMER_PAUSE_AT   optional N: after the N-th event's effects in this process, print a
//                          `paused` line and wait forever — inside the batch's PostgreSQL
//                          transaction, after the effect and before the receipts and the
//                          checkpoint — so the test kills it exactly there.
//   EA_CONSUMER_ATOMIC     'transaction' runs the projection in the transaction-atomic mode
//                          (default 'batch'); the crash test switches modes between children.
//   EA_CONSUMER_NEGATIVE_CONTROL=1  the log row of each applied event is written outside the
//                          batch's transaction (a separate autocommit connection): the crash
//                          test must then FAIL, with events applied twice — proof it can tell.
//
// It prints one JSON object per line on stdout: `started`, `paused`, `stopped` (on SIGTERM, after
// the batch in flight, with the runner's status). The runner's log goes to stderr.
import pg from 'pg';
import { createProjectionRunner, type ProjectionEvent } from '../../src/consumer/index.js';
import { ledgerProjection } from './consumer-ledger.js';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`consumer-child: ${name} is not set`);
  return value;
}

/** Lines on a pipe are written synchronously on Linux: the parent has the line before we wait. */
function say(message: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(message, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))}\n`);
}

const pauseAt = Number(process.env['EA_CONSUMER_PAUSE_AT'] ?? 0);
let effects = 0;

async function onEffect(event: ProjectionEvent): Promise<void> {
  effects++;
  if (effects !== pauseAt) return;
  say({ event: 'paused', effects, id: event.id, stream: event.stream, revision: event.revision, commit: event.position.commit, prepare: event.position.prepare });
  // Hold the transaction open until the parent's SIGKILL (the timer keeps the process alive on its own).
  setInterval(() => {}, 1 << 30);
  await new Promise<never>(() => {});
}

const log = (level: string) => (message: string, fields?: Record<string, unknown>) =>
  process.stderr.write(`${JSON.stringify({ level, message, ...fields }, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value instanceof Error ? value.stack : value))}\n`);

/** The negative control's own connection, under another application_name (the test finds the runner's backend by its name). */
function outsidePool(): pg.Pool | undefined {
  if (process.env['EA_CONSUMER_NEGATIVE_CONTROL'] !== '1') return undefined;
  const url = new URL(required('EA_CONSUMER_POSTGRES'));
  url.searchParams.set('application_name', `${url.searchParams.get('application_name') ?? 'consumer'}-outside`);
  return new pg.Pool({ connectionString: url.toString(), max: 1 });
}

const outside = outsidePool();
const runner = createProjectionRunner({
  projection: ledgerProjection(onEffect, outside, process.env['EA_CONSUMER_ATOMIC'] === 'transaction' ? 'transaction' : 'batch'),
  postgres: required('EA_CONSUMER_POSTGRES'),
  kurrentdb: required('EA_CONSUMER_KURRENTDB'),
  logger: { info: log('info'), warn: log('warn'), error: log('error') },
});
process.once('SIGTERM', () => void runner.stop());
say({ event: 'started', pid: process.pid, pauseAt });
try {
  await runner.run();
  say({ event: 'stopped', status: { ...runner.status(), error: null } });
} catch (error) {
  log('error')('consumer-child: run() failed', { error });
  process.exitCode = 1;
} finally {
  await outside?.end();
}
