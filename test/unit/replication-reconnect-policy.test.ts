import { describe, expect, it } from 'vitest';
import { ReplicationError } from '../../src/source/replication/errors.js';
import { backoffDelay, createReconnectPolicy, DEFAULT_BACKOFF, isRetryable, type BackoffOptions } from '../../src/source/replication/reconnect-policy.js';

const noJitter: BackoffOptions = { initialMs: 100, maxMs: 1_000, multiplier: 2, jitter: 0, maxAttempts: 3 };
const sqlError = (code: string, message = 'boom') => Object.assign(new Error(message), { code });

describe('reconnect policy: backoff', () => {
  it('grows exponentially from initialMs and stops at maxMs', () => {
    expect([0, 1, 2, 3, 4, 5].map((a) => backoffDelay(a, noJitter))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
  });

  it('spreads a delay down by at most jitter × delay', () => {
    const b = { ...noJitter, jitter: 0.5 };
    expect(backoffDelay(1, b, () => 0)).toBe(200);
    expect(backoffDelay(1, b, () => 1)).toBe(100);
    expect(backoffDelay(1, b, () => 0.5)).toBe(150);
  });

  it('defaults to 500 ms doubling up to 30 s, half jitter, unlimited attempts', () => {
    expect(DEFAULT_BACKOFF).toEqual({ initialMs: 500, maxMs: 30_000, multiplier: 2, jitter: 0.5, maxAttempts: Number.POSITIVE_INFINITY });
  });
});

describe('reconnect policy: retryable or fatal', () => {
  it.each([
    ['admin shutdown', sqlError('57P01')],
    ['slot still active for the previous walsender', sqlError('55006')],
    ['connection refused', sqlError('ECONNREFUSED')],
    ['connection terminated (pg message)', new Error('Connection terminated unexpectedly')],
    ['database starting up', new Error('the database system is starting up')],
  ])('retries %s', (_name, error) => {
    expect(isRetryable(error)).toBe(true);
    expect(createReconnectPolicy(noJitter).isFatal(error)).toBe(false);
  });

  it.each([
    ['a ReplicationError, even with a retryable code', new ReplicationError('57P01', 'slot invalidated')],
    ['permission denied', sqlError('42501', 'permission denied')],
    ['an unknown error', new Error('something else')],
  ])('gives up on %s', (_name, error) => {
    expect(createReconnectPolicy(noJitter).isFatal(error)).toBe(true);
  });
});

describe('reconnect policy: attempts', () => {
  it('numbers attempts, counts reconnects, and gives up after maxAttempts failures in a row', () => {
    const policy = createReconnectPolicy(noJitter, () => 0);
    const lost = sqlError('08006');
    const seen = [];
    while (!policy.isFatal(lost)) seen.push(policy.next());
    expect(seen).toEqual([{ delayMs: 100, attempt: 1 }, { delayMs: 200, attempt: 2 }, { delayMs: 400, attempt: 3 }]);
    expect(policy.reconnects).toBe(3);
  });

  it('starts the backoff over once a session reaches streaming; reconnects keep counting', () => {
    const policy = createReconnectPolicy(noJitter, () => 0);
    policy.next();
    policy.next();
    policy.reset();
    expect(policy.next()).toEqual({ delayMs: 100, attempt: 1 });
    expect(policy.reconnects).toBe(3);
    expect(policy.isFatal(sqlError('08006'))).toBe(false);
  });
});
