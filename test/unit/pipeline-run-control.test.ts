// Run control: a stop ends every wait at once; the first fatal error wins, redacted, and stops the line.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRedactor } from '../../src/config/redact.js';
import { EventAssemblerError } from '../../src/errors.js';
import type { Logger } from '../../src/pipeline/logger.js';
import { createRunControl, errorInfo } from '../../src/pipeline/run-control.js';
import { deferred } from '../support/deferred.js';

const CONNECTION = 'postgres://capture:s3cret-pw@db:5432/app';

function recordingLog(): Logger & { lines: { level: string; message: string; fields?: Record<string, unknown> }[] } {
  const lines: { level: string; message: string; fields?: Record<string, unknown> }[] = [];
  return {
    lines,
    info: (message, fields) => void lines.push({ level: 'info', message, ...(fields ? { fields } : {}) }),
    warn: (message, fields) => void lines.push({ level: 'warn', message, ...(fields ? { fields } : {}) }),
    error: (message, fields) => void lines.push({ level: 'error', message, ...(fields ? { fields } : {}) }),
  };
}

function newControl() {
  const log = recordingLog();
  return { log, control: createRunControl(log, createRedactor([CONNECTION])) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('run control: until()', () => {
  it('passes the value through when the promise settles first', async () => {
    const { control } = newControl();
    const d = deferred<number>();
    const waiting = control.until(d.promise);
    d.resolve(42);
    await expect(waiting).resolves.toBe(42);
    expect(control.stopRequested).toBe(false);
  });

  it('passes a rejection through', async () => {
    const { control } = newControl();
    const d = deferred<number>();
    const waiting = control.until(d.promise);
    d.reject(new Error('boom'));
    await expect(waiting).rejects.toThrow('boom');
  });

  it("resolves 'stop' as soon as a stop is requested, without waiting for the promise", async () => {
    const { control } = newControl();
    const never = new Promise<number>(() => undefined);
    const waiting = control.until(never);
    control.requestStop();
    await expect(waiting).resolves.toBe('stop');
  });

  it("resolves 'stop' at once after a stop, even for a promise already resolved", async () => {
    const { control } = newControl();
    control.requestStop();
    await expect(control.until(Promise.resolve(1))).resolves.toBe('stop');
  });

  it('a promise settling after the stop changes nothing (a later rejection is not unhandled)', async () => {
    const { control } = newControl();
    const d = deferred<number>();
    const waiting = control.until(d.promise);
    control.requestStop();
    d.reject(new Error('late'));
    await expect(waiting).resolves.toBe('stop');
  });

  it('wakes every pending wait on one stop', async () => {
    const { control } = newControl();
    const waits = [1, 2, 3].map(() => control.until(new Promise<never>(() => undefined)));
    control.requestStop();
    await expect(Promise.all(waits)).resolves.toEqual(['stop', 'stop', 'stop']);
  });
});

describe('run control: sleep()', () => {
  it('returns false when the time passed without a stop', async () => {
    vi.useFakeTimers();
    const { control } = newControl();
    let result: boolean | undefined;
    void control.sleep(1_000).then((r) => (result = r));
    await vi.advanceTimersByTimeAsync(999);
    expect(result).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(result).toBe(false);
  });

  it('ends early with true on a stop, and leaves no timer behind', async () => {
    vi.useFakeTimers();
    const { control } = newControl();
    const sleeping = control.sleep(60_000);
    expect(vi.getTimerCount()).toBe(1);
    control.requestStop();
    await expect(sleeping).resolves.toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('returns true at once when a stop was already requested', async () => {
    vi.useFakeTimers();
    const { control } = newControl();
    control.requestStop();
    await expect(control.sleep(60_000)).resolves.toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('run control: stop and signal', () => {
  it('aborts its signal on stop, once', () => {
    const { control } = newControl();
    let aborts = 0;
    control.signal.addEventListener('abort', () => (aborts += 1));
    expect(control.signal.aborted).toBe(false);
    control.requestStop();
    control.requestStop();
    expect(control.signal.aborted).toBe(true);
    expect(control.stopRequested).toBe(true);
    expect(aborts).toBe(1);
    expect(control.fatal).toBeNull();
  });
});

describe('run control: fail()', () => {
  it('keeps the first error, redacted, logs it once and requests a stop', () => {
    const { control, log } = newControl();
    const first = new EventAssemblerError('SINK_FAILED', `append failed for ${CONNECTION}`);
    control.fail(first);
    control.fail(new Error('second'));
    expect(control.fatal).toBe(first);
    expect((control.fatal as Error).message).toBe('append failed for postgres://capture:***@db:5432/app');
    expect((control.fatal as Error).stack).not.toContain('s3cret-pw');
    expect(control.stopRequested).toBe(true);
    expect(control.signal.aborted).toBe(true);
    expect(log.lines).toEqual([
      { level: 'error', message: 'assembler: fatal error, stopping', fields: { error: { code: 'SINK_FAILED', message: 'append failed for postgres://capture:***@db:5432/app' } } },
    ]);
  });

  it('masks a known secret value wherever it appears in the message', () => {
    const { control } = newControl();
    control.fail(new Error('server said: password "s3cret-pw" is wrong'));
    expect((control.fatal as Error).message).toBe('server said: password "***" is wrong');
  });

  it('ends pending waits like a stop', async () => {
    const { control } = newControl();
    const waiting = control.until(new Promise<never>(() => undefined));
    control.fail(new Error('boom'));
    await expect(waiting).resolves.toBe('stop');
  });
});

describe('run control: abandon()', () => {
  it('sets abandoned, requests a stop, and makes later failures no-ops', () => {
    const { control, log } = newControl();
    expect(control.abandoned).toBe(false);
    control.abandon();
    expect(control.abandoned).toBe(true);
    expect(control.stopRequested).toBe(true);
    expect(control.signal.aborted).toBe(true);
    control.fail(new Error('sink closed under the drain'));
    expect(control.fatal).toBeNull();
    expect(log.lines).toEqual([]);
  });

  it('keeps a fatal error recorded before it', () => {
    const { control } = newControl();
    const error = new Error('first');
    control.fail(error);
    control.abandon();
    control.fail(new Error('after abandon'));
    expect(control.fatal).toBe(error);
    expect(control.abandoned).toBe(true);
  });
});

describe('errorInfo', () => {
  it.each([
    ['an EventAssemblerError: its code', new EventAssemblerError('REBUILD_NEEDED', 'slot ahead'), { code: 'REBUILD_NEEDED', message: 'slot ahead' }],
    ['a node error: its string code', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' }],
    ['a numeric code: none', Object.assign(new Error('unavailable'), { code: 14 }), { code: null, message: 'unavailable' }],
    ['a plain Error: none', new Error('plain'), { code: null, message: 'plain' }],
    ['a string', 'just text', { code: null, message: 'just text' }],
    ['null', null, { code: null, message: 'null' }],
    ['undefined', undefined, { code: null, message: 'undefined' }],
  ])('%s', (_name, error, expected) => {
    expect(errorInfo(error)).toEqual(expected);
  });
});
