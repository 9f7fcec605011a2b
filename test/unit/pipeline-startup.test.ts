// Start-up: unreachable servers are waited for with one policy — logged per attempt, ended by a stop or the deadline.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRedactor } from '../../src/config/redact.js';
import { DestinationConnectionError, SourceConnectionError, StartupUnavailableError } from '../../src/pipeline/errors.js';
import { isTlsFailure, isTransientError } from '../../src/sink/retry.js';
import { silentLogger, type Logger } from '../../src/pipeline/logger.js';
import { createRunControl, StopBeforeStart, type RunControl } from '../../src/pipeline/run-control.js';
import { createStartupGuard, isPostgresUnreachable, postgresAddress, retryAtStartup } from '../../src/pipeline/startup.js';

const coded = (code: string, message: string): Error => Object.assign(new Error(message), { code });

afterEach(() => {
  vi.useRealTimers();
});

describe('isPostgresUnreachable', () => {
  it.each<[string, unknown, boolean]>([
    ['connection refused', coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'), true],
    ['the server starting up (57P03)', coded('57P03', 'the database system is starting up'), true],
    // A PostgreSQL restart met while connecting: the postmaster killed (its backends end with
    // 57P01), a fast shutdown (57P01), a crash of another backend (57P02).
    ['the postmaster gone while connecting (57P01)', coded('57P01', 'terminating connection due to unexpected postmaster exit'), true],
    ['a fast shutdown while connecting (57P01)', coded('57P01', 'terminating connection due to administrator command'), true],
    ['a crash shutdown while connecting (57P02)', coded('57P02', 'terminating connection because of crash of another server process'), true],
    ['the same without a code', new Error('terminating connection due to unexpected postmaster exit'), true],
    ['a connection failure of class 08 (08006)', coded('08006', 'connection failure'), true],
    ['too many connections (53300)', coded('53300', 'sorry, too many clients already'), true],
    ['every address of the host refused (AggregateError)', new AggregateError([coded('ECONNREFUSED', 'connect ECONNREFUSED ::1:5432'), coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')], ''), true],
    ['a connect timeout without a code', new Error('timeout expired'), true],
    ['a dropped connection without a code', new Error('Connection terminated unexpectedly'), true],
    ['authentication failed (28P01)', coded('28P01', 'password authentication failed for user "capture"'), false],
    ['unknown database (3D000)', coded('3D000', 'database "app" does not exist'), false],
    ['an AggregateError with one refusal that waiting does not cure', new AggregateError([coded('ECONNREFUSED', 'refused'), coded('28P01', 'password authentication failed')], ''), false],
    ['an empty AggregateError', new AggregateError([], ''), false],
    ['a string', 'ECONNREFUSED', false],
    ['null', null, false],
  ])('%s → %s', (_name, error, expected) => {
    expect(isPostgresUnreachable(error)).toBe(expected);
  });
});

describe('postgresAddress', () => {
  it.each([
    ['a URL with a password', 'postgres://capture:s3cret@db.internal:6543/app', 'db.internal:6543'],
    ['a URL without a port', 'postgresql://capture:s3cret@db.internal/app?sslmode=require', 'db.internal:5432'],
    ['the socket form without a user', 'postgres:///app?host=/var/run/postgresql', '/var/run/postgresql:5432'],
    ['the socket form with a user and password (no WHATWG URL; pg reads it)', 'postgresql://capture:s3cret@/app?host=/var/run/postgresql', '/var/run/postgresql:5432'],
    ['?host= and ?port= overriding the URL\'s host', 'postgres://capture:s3cret@db.internal/app?host=/tmp&port=5433', '/tmp:5433'],
    ['key=value', 'host=db.internal port=6543 user=capture password=s3cret dbname=app', 'db.internal:6543'],
    ['key=value without host and port', 'user=capture password=s3cret dbname=app', 'localhost:5432'],
  ])('%s', (_name, connection, expected) => {
    const address = postgresAddress(connection);
    expect(address).toBe(expected);
    expect(address).not.toContain('s3cret');
  });
});

function warnLog(): Logger & { warns: { message: string; fields: Record<string, unknown> | undefined }[] } {
  const warns: { message: string; fields: Record<string, unknown> | undefined }[] = [];
  return { ...silentLogger, warns, warn: (message, fields) => void warns.push({ message, fields }) };
}

/** An attempt that fails with `failures` errors in turn, then resolves `'ok'`. */
function flaky(failures: readonly unknown[]) {
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    attempt: (): Promise<string> => {
      const failure = failures[calls];
      calls += 1;
      return failure === undefined ? Promise.resolve('ok') : Promise.reject(failure);
    },
  };
}

/** Lets queued promise reactions run until `done()` holds (no time passes). */
async function untilTrue(done: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !done(); i++) await Promise.resolve();
  expect(done()).toBe(true);
}

const PG = { name: 'PostgreSQL' as const, address: 'db.internal:5432' };
const refused = coded('ECONNREFUSED', 'connect ECONNREFUSED 10.0.0.5:5432');

function newControl(): RunControl {
  return createRunControl(silentLogger, createRedactor());
}

describe('retryAtStartup', () => {
  it('succeeds after transient failures, logging one line per attempt with server, address and reason', async () => {
    vi.useFakeTimers();
    const control = newControl();
    const guard = createStartupGuard(control, null);
    const log = warnLog();
    const server = flaky([refused, coded('57P03', 'the database system is starting up'), refused]);
    const result = retryAtStartup(PG, server.attempt, { guard, log, transient: isPostgresUnreachable });
    await vi.runAllTimersAsync();
    await expect(result).resolves.toBe('ok');
    expect(server.calls).toBe(4);
    expect(log.warns.map((w) => w.message)).toEqual(Array(3).fill('start-up: PostgreSQL unreachable, retrying'));
    expect(log.warns.map((w) => w.fields)).toEqual([
      { server: 'PostgreSQL', address: 'db.internal:5432', reason: 'connect ECONNREFUSED 10.0.0.5:5432', attempt: 1, delayMs: expect.any(Number) },
      { server: 'PostgreSQL', address: 'db.internal:5432', reason: '57P03: the database system is starting up', attempt: 2, delayMs: expect.any(Number) },
      { server: 'PostgreSQL', address: 'db.internal:5432', reason: 'connect ECONNREFUSED 10.0.0.5:5432', attempt: 3, delayMs: expect.any(Number) },
    ]);
    guard.dispose();
  });

  it('waits the logged backoff (250 ms doubling, with jitter) before the next attempt', async () => {
    vi.useFakeTimers();
    const guard = createStartupGuard(newControl(), null);
    const log = warnLog();
    const server = flaky([refused, refused]);
    const result = retryAtStartup(PG, server.attempt, { guard, log, transient: isPostgresUnreachable });
    for (const [n, [low, high]] of [[125, 250], [250, 500]].entries()) {
      await untilTrue(() => log.warns.length === n + 1);
      const delayMs = log.warns[n]!.fields!['delayMs'] as number;
      expect(delayMs).toBeGreaterThanOrEqual(low!);
      expect(delayMs).toBeLessThanOrEqual(high!);
      await vi.advanceTimersByTimeAsync(delayMs - 1);
      expect(server.calls).toBe(n + 1);
      await vi.advanceTimersByTimeAsync(1);
      expect(server.calls).toBe(n + 2);
    }
    await expect(result).resolves.toBe('ok');
    guard.dispose();
  });

  it('throws a refusal that waiting does not cure at once, through `refused` when given', async () => {
    const guard = createStartupGuard(newControl(), null);
    const log = warnLog();
    const auth = coded('28P01', 'password authentication failed for user "capture"');
    const server = flaky([auth]);
    const error = await retryAtStartup(PG, server.attempt, {
      guard, log, transient: isPostgresUnreachable,
      refused: (e) => new SourceConnectionError(PG.address, (e as Error).message, '28P01'),
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SourceConnectionError);
    expect(error).toMatchObject({ code: 'SOURCE_CONNECTION_FAILED', details: { server: 'PostgreSQL', address: 'db.internal:5432', sqlState: '28P01' } });
    expect(server.calls).toBe(1);
    expect(log.warns).toEqual([]);

    const again = flaky([auth]);
    await expect(retryAtStartup(PG, again.attempt, { guard, log, transient: isPostgresUnreachable })).rejects.toBe(auth);
    guard.dispose();
  });

  it('ends the backoff at once with StopBeforeStart when a stop is requested', async () => {
    vi.useFakeTimers();
    const control = newControl();
    const guard = createStartupGuard(control, 60_000);
    const log = warnLog();
    const server = flaky(Array(100).fill(refused));
    const outcome = retryAtStartup(PG, server.attempt, { guard, log, transient: isPostgresUnreachable }).catch((e: unknown) => e);
    await untilTrue(() => log.warns.length === 1);
    control.requestStop();
    const error = await outcome;
    expect(error).toBeInstanceOf(StopBeforeStart);
    expect(server.calls).toBe(1);
    expect(guard.expired).toBe(false);
    guard.dispose();
  });

  it.each([
    [{ name: 'PostgreSQL' as const, address: 'db.internal:5432' }, 'SOURCE_UNAVAILABLE'],
    [{ name: 'KurrentDB' as const, address: 'kurrentdb:2113' }, 'DESTINATION_UNAVAILABLE'],
  ])('ends at the deadline with StartupUnavailableError (%o → %s)', async (server, code) => {
    vi.useFakeTimers();
    const guard = createStartupGuard(newControl(), 3_000);
    const log = warnLog();
    const attempts = flaky(Array(100).fill(refused));
    const outcome = retryAtStartup(server, attempts.attempt, { guard, log, transient: isPostgresUnreachable }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(3_000);
    const error = await outcome;
    expect(error).toBeInstanceOf(StartupUnavailableError);
    expect(error).toMatchObject({ code, details: { server: server.name, address: server.address, waitedMs: 3_000, reason: 'connect ECONNREFUSED 10.0.0.5:5432' } });
    expect((error as Error).message).toContain(`${server.name} at ${server.address} stayed unreachable for 3000 ms`);
    expect(guard.expired).toBe(true);
    expect(log.warns.length).toBeGreaterThan(1);
    expect(attempts.calls).toBe(log.warns.length); // every failed attempt logged; the deadline cut the last backoff short
    guard.dispose();
  });
});

describe('createStartupGuard', () => {
  it('is aborted at once when the run was already stopped', () => {
    const control = newControl();
    control.requestStop();
    const guard = createStartupGuard(control, 60_000);
    expect(guard.signal.aborted).toBe(true);
    expect(guard.expired).toBe(false);
    guard.dispose();
  });

  it('no longer expires, nor follows a stop, once disposed', async () => {
    vi.useFakeTimers();
    const control = newControl();
    const guard = createStartupGuard(control, 1_000);
    guard.dispose();
    await vi.advanceTimersByTimeAsync(5_000);
    control.requestStop();
    expect(guard.expired).toBe(false);
    expect(guard.signal.aborted).toBe(false);
  });
});

describe('refusals that waiting does not cure say what to change', () => {
  // What @grpc/grpc-js reports for `tls=true` against a server without TLS (checked against the in-memory server).
  const wrongVersion = Object.assign(
    new Error('14 UNAVAILABLE: No connection established. Last error: Error: 801CE5AA6F7F0000:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:350:\n. Resolution note: '),
    { code: 14 },
  );

  it('a TLS handshake that cannot succeed is no KurrentDB outage; a dropped connection still is', () => {
    expect(isTlsFailure(wrongVersion)).toBe(true);
    expect(isTransientError(wrongVersion)).toBe(false);
    expect(isTransientError(Object.assign(new Error('14 UNAVAILABLE: self-signed certificate in certificate chain'), { code: 14 }))).toBe(false);
    const dropped = Object.assign(new Error('14 UNAVAILABLE: Client network socket disconnected before secure TLS connection was established'), { code: 14 });
    expect(isTlsFailure(dropped)).toBe(false);
    expect(isTransientError(dropped)).toBe(true);
  });

  it('DESTINATION_CONNECTION_FAILED and SOURCE_CONNECTION_FAILED name the field and the fix', () => {
    const tls = new DestinationConnectionError('db.internal:2113', 'wrong version number');
    expect(tls.message).toBe(
      'KurrentDB at db.internal:2113 (destination.connectionString) refused the connection: the TLS handshake failed (wrong version number). Nothing was read or written — ' +
        'fix: the server does not speak TLS at that address: set tls=false in destination.connectionString (or serve TLS on the server)',
    );
    expect(new DestinationConnectionError('db.internal:2113', 'self-signed certificate').message).toContain('fix: make the server\'s certificate trusted: tlsCAFile=');
    expect(new SourceConnectionError('db.internal:5432', 'password authentication failed for user "capture"', '28P01').message).toMatch(
      /^PostgreSQL at db\.internal:5432 \(source\.connection\) refused the capture connection: .* \(SQLSTATE 28P01\)\. Nothing was read or written — fix: check the user and password in source\.connection/,
    );
    expect(new SourceConnectionError('db.internal:5432', 'database "shop" does not exist', '3D000').details.fix).toMatch(/database name/);
    expect(new SourceConnectionError('db.internal:5432', 'The server does not support SSL connections', null).details.fix).toMatch(/remove sslmode from source\.connection/);
  });
});
