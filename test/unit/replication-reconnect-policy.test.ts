import { describe, expect, it } from 'vitest';
import { ReplicationError, SlotActiveError, slotActivePid } from '../../src/source/replication/errors.js';
import {
  backoffDelay, classifyFailure, createReconnectPolicy, DEFAULT_BACKOFF, DEFAULT_SLOT_POLL_INTERVAL_MS, isRetryable, type BackoffOptions, type FailureKind,
} from '../../src/source/replication/reconnect-policy.js';

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

describe('reconnect policy: a slot streamed by another connection (standby)', () => {
  const holder = { pid: 4711, client: '10.0.0.5:53422', applicationName: null, ours: false };

  it.each<[string, unknown, FailureKind]>([
    ['SlotActiveError (found before START_REPLICATION)', new SlotActiveError('shop', holder), 'slot-active'],
    ["PostgreSQL's refusal of START_REPLICATION (55006 with its message)", sqlError('55006', 'replication slot "shop" is active for PID 4711'), 'slot-active'],
    ['55006 for something else (object in use)', sqlError('55006', 'database "shop" is being accessed by other users'), 'retryable'],
    ['a lost connection', sqlError('08006', 'connection failure'), 'retryable'],
    ['admin shutdown', sqlError('57P01', 'terminating connection due to administrator command'), 'retryable'],
    ['a ReplicationError', new ReplicationError('SOURCE_SLOT_MISSING', 'replication slot "shop" does not exist'), 'fatal'],
    ['permission denied', sqlError('42501', 'permission denied'), 'fatal'],
  ])('classifies %s as %s', (_name, error, kind) => {
    expect(classifyFailure(error)).toBe(kind);
  });

  it('reads the holder pid from the refusal only', () => {
    expect(slotActivePid(sqlError('55006', 'replication slot "shop_assembler" is active for PID 12345'))).toBe(12345);
    expect(slotActivePid(new Error('replication slot "shop_assembler" is active for PID 12345'))).toBe(12345);
    expect(slotActivePid(sqlError('08006', 'replication slot "shop_assembler" is active for PID 12345'))).toBeNull();
    expect(slotActivePid(sqlError('55006', 'object in use'))).toBeNull();
  });

  it('polls at the fixed interval without growing the backoff, never gives up, and counts polls as reconnects', () => {
    const policy = createReconnectPolicy(noJitter, () => 0, 1_000);
    const busy = new SlotActiveError('shop', holder);
    // Far more polls than maxAttempts (3): waiting for the slot is never given up on.
    const decisions = Array.from({ length: 10 }, () => policy.afterFailure(busy));
    expect(decisions).toEqual(Array.from({ length: 10 }, () => ({ action: 'poll', delayMs: 1_000 })));
    expect(policy.reconnects).toBe(10);
    // The backoff did not grow meanwhile: a connection loss starts at initialMs.
    expect(policy.afterFailure(sqlError('08006'))).toEqual({ action: 'reconnect', delayMs: 100, attempt: 1 });
    expect(policy.afterFailure(sqlError('08006'))).toEqual({ action: 'reconnect', delayMs: 200, attempt: 2 });
    // …and the poll interval does not grow with it.
    expect(policy.afterFailure(busy)).toEqual({ action: 'poll', delayMs: 1_000 });
    expect(policy.afterFailure(sqlError('08006'))).toEqual({ action: 'reconnect', delayMs: 400, attempt: 3 });
    expect(policy.afterFailure(sqlError('08006'))).toEqual({ action: 'fail' });
    expect(policy.afterFailure(busy)).toEqual({ action: 'poll', delayMs: 1_000 });
  });

  it('polls every second by default', () => {
    expect(DEFAULT_SLOT_POLL_INTERVAL_MS).toBe(1_000);
    expect(createReconnectPolicy(noJitter).afterFailure(new SlotActiveError('shop', holder))).toEqual({ action: 'poll', delayMs: 1_000 });
  });

  it('fails at once on a fatal error, whatever came before', () => {
    const policy = createReconnectPolicy(noJitter, () => 0);
    policy.afterFailure(new SlotActiveError('shop', holder));
    expect(policy.afterFailure(sqlError('42501', 'permission denied'))).toEqual({ action: 'fail' });
  });
});
