// Run stats: the commit → durable lag window (a ring of the last samples) and its percentiles.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLagWindow, createRunStats, LAG_WINDOW, parseCommitTime } from '../../src/pipeline/run-stats.js';

/** A clock the test moves. */
function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('createLagWindow', () => {
  it('has no percentiles before the first sample', () => {
    expect(createLagWindow(10).percentiles()).toBeNull();
  });

  it('gives p50, p99 and max of known samples (nearest rank)', () => {
    const window = createLagWindow(1_000);
    for (let ms = 100; ms >= 1; ms--) window.add(ms); // 1..100, added out of order
    expect(window.percentiles()).toEqual({ samples: 100, p50Ms: 50, p99Ms: 99, maxMs: 100 });
  });

  it('handles a single sample and rounds to whole milliseconds', () => {
    const window = createLagWindow(10);
    window.add(12.6);
    expect(window.percentiles()).toEqual({ samples: 1, p50Ms: 13, p99Ms: 13, maxMs: 13 });
  });

  it('keeps only the last `size` samples: a new one replaces the oldest', () => {
    const c = clock();
    const window = createLagWindow(4, c.now);
    for (const ms of [1000, 900, 10, 20]) window.add(ms);
    expect(window.percentiles()).toEqual({ samples: 4, p50Ms: 20, p99Ms: 1000, maxMs: 1000 });
    c.advance(250);
    window.add(30); // replaces 1000
    window.add(40); // replaces 900
    expect(window.percentiles()).toEqual({ samples: 4, p50Ms: 20, p99Ms: 40, maxMs: 40 });
    c.advance(250);
    for (const ms of [1, 2, 3, 4, 5]) window.add(ms); // wraps around the ring again: 10, 20, 30, 40 and then 1 are gone
    expect(window.percentiles()).toEqual({ samples: 4, p50Ms: 3, p99Ms: 5, maxMs: 5 });
  });

  it('computes at most every 250 ms while samples come in', () => {
    const c = clock();
    const window = createLagWindow(100, c.now);
    window.add(10);
    const first = window.percentiles();
    expect(first).toEqual({ samples: 1, p50Ms: 10, p99Ms: 10, maxMs: 10 });
    window.add(500);
    c.advance(249);
    expect(window.percentiles()).toBe(first); // cached: the new sample is not counted yet
    c.advance(1);
    expect(window.percentiles()).toEqual({ samples: 2, p50Ms: 10, p99Ms: 500, maxMs: 500 });
  });

  it('keeps the cached value, however old, while no sample came in', () => {
    const c = clock();
    const window = createLagWindow(100, c.now);
    window.add(7);
    const first = window.percentiles();
    c.advance(60_000);
    expect(window.percentiles()).toBe(first);
  });
});

describe('createRunStats', () => {
  it('records the lag from the commit time to now: last, average and percentiles', () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-01-15T10:00:01.000Z'));
    const stats = createRunStats();
    expect(stats.lag()).toEqual({ lastMs: null, avgMs: null, percentiles: null });
    stats.recordLag('2026-01-15T10:00:00.000000Z'); // 1000 ms ago (microsecond precision, as the source gives it)
    stats.recordLag('2026-01-15T10:00:00.500Z'); // 500 ms ago
    expect(stats.lag()).toEqual({ lastMs: 500, avgMs: 750, percentiles: { samples: 2, p50Ms: 500, p99Ms: 1000, maxMs: 1000 } });
  });

  it('ignores a commit time it cannot parse', () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-01-15T10:00:01.000Z'));
    const stats = createRunStats();
    stats.recordLag('2026-01-15T10:00:00.800Z');
    stats.recordLag('not a time');
    stats.recordLag('');
    expect(stats.lag()).toEqual({ lastMs: 200, avgMs: 200, percentiles: { samples: 1, p50Ms: 200, p99Ms: 200, maxMs: 200 } });
  });

  it('counts a commit time in the future (clock skew) as no lag', () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-01-15T10:00:00.000Z'));
    const stats = createRunStats();
    stats.recordLag('2026-01-15T10:00:05.000Z');
    expect(stats.lag().lastMs).toBe(0);
  });

  it('starts with every counter at zero', () => {
    const stats = createRunStats();
    expect(stats.counts).toEqual({ received: 0, appended: 0, skipped: 0, parkedTx: 0, sliced: 0, eventsAppended: 0, replaySkipped: 0, mapperFailures: 0, contractViolations: 0 });
    expect(stats.byType).toEqual({});
    expect(LAG_WINDOW).toBeGreaterThan(0);
  });
});

describe('parseCommitTime', () => {
  it('gives what Date.parse gives for the decoder\'s commit times: the same day, the next day, midnight, the last millisecond, the year 2000', () => {
    const times = [
      '2026-12-07T13:32:01.123456Z', '2026-12-07T13:32:01.999999Z', '2026-12-07T00:00:00.000000Z', '2026-12-07T23:59:59.999000Z',
      '2026-12-08T00:00:00.001000Z', '2026-12-07T13:32:01.123456Z', '2000-01-01T00:00:00.000000Z', '2000-01-01T12:34:56.789012Z',
    ];
    // Twice over: the second pass parses most of them through the cached day.
    for (const text of [...times, ...times]) expect(parseCommitTime(text)).toBe(Date.parse(text));
  });

  it('gives NaN, as Date.parse does, for what is not a time, also after a day is cached', () => {
    parseCommitTime('2026-12-07T13:32:01.123456Z');
    for (const text of ['2026-12-07T13:3x:01.123456Z', '2026-12-07T25:00:00.000000Z', '2026-12-07T13:32:01.123x56Z', 'not a time']) {
      expect(parseCommitTime(text)).toBeNaN();
      expect(Date.parse(text)).toBeNaN();
    }
    expect(parseCommitTime('infinity')).toBeNaN();
  });
});
