// Which failed run attempts are followed by a new one in the same process (attempt-retry.ts):
// PostgreSQL going away, as node-postgres reports it — never a diagnosis of ours.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { StartupUnavailableError } from '../../src/pipeline/errors.js';
import { attemptRetryDelay, createAttemptRetries, isSourceConnectionLoss } from '../../src/pipeline/attempt-retry.js';

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'FATAL' });

describe('isSourceConnectionLoss', () => {
  it.each([
    ['an immediate shutdown', pgError('57P01', 'terminating connection due to unexpected postmaster exit')],
    ['a fast shutdown', pgError('57P01', 'terminating connection due to administrator command')],
    ['crash recovery under way', pgError('57P03', 'the database system is starting up')],
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['a query after the socket failed', new Error('Client has encountered a connection error and is not queryable')],
    ['a connection cut mid-query', new Error('Connection terminated unexpectedly')],
  ])('retries %s', (_label, error) => {
    expect(isSourceConnectionLoss(error)).toBe(true);
  });

  it.each([
    ['a unique violation', pgError('23505', 'duplicate key value violates unique constraint')],
    ['a wrong password', pgError('28P01', 'password authentication failed for user "capture"')],
    ['a configuration error', new ConfigError('source.slot', 'missing', 'set it')],
    ['start-up given up after lifecycle.startupTimeoutMs', new StartupUnavailableError({ server: 'PostgreSQL', address: 'db:5432', waitedMs: 1000, reason: 'ECONNREFUSED' })],
    ['a mapper bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
  ])('does not retry %s', (_label, error) => {
    expect(isSourceConnectionLoss(error)).toBe(false);
  });
});

describe('attempt retries', () => {
  it('pauses 0.5 s, doubling to 30 s', () => {
    expect([1, 2, 3, 4, 7, 8, 20].map(attemptRetryDelay)).toEqual([500, 1_000, 2_000, 4_000, 30_000, 30_000, 30_000]);
  });

  it('starts the pauses over after an attempt that lasted a minute', () => {
    let now = 0;
    const retries = createAttemptRetries(() => now);
    retries.started();
    expect(retries.failed()).toEqual({ delayMs: 500, failures: 1 });
    retries.started();
    now += 1_000;
    expect(retries.failed()).toEqual({ delayMs: 1_000, failures: 2 });
    retries.started();
    now += 60_000;
    expect(retries.failed()).toEqual({ delayMs: 500, failures: 1 });
  });
});
