// Status: the appender's sink and the checkpoint writer's shown as one sink; the appender's batching.
import { describe, expect, it } from 'vitest';
import type { Appender } from '../../src/pipeline/appender.js';
import { aggregateSinkStatus, batchingStatus } from '../../src/pipeline/status.js';
import type { KurrentDBSink, Sink, SinkStatus } from '../../src/sink/index.js';

const HEALTHY: SinkStatus = {
  mode: 'multi-stream',
  state: 'connected',
  attempts: 0,
  retries: 0,
  lastError: null,
  cachedStreams: 0,
  appendedEvents: 0,
  skippedEvents: 0,
};

function kurrentSink(status: Partial<SinkStatus>): KurrentDBSink {
  const current = { ...HEALTHY, ...status };
  return {
    mode: current.mode,
    status: () => current,
    append: () => Promise.reject(new Error('not used')),
    appendMany: () => Promise.reject(new Error('not used')),
    close: () => Promise.resolve(),
  };
}

/** A custom sink (e.g. a benchmark's null sink): no status of its own. */
const customSink: Sink = { append: () => Promise.reject(new Error('not used')), close: () => Promise.resolve() };

describe('aggregateSinkStatus', () => {
  it('is null without KurrentDB sinks', () => {
    expect(aggregateSinkStatus([])).toBeNull();
    expect(aggregateSinkStatus([null, null])).toBeNull();
    expect(aggregateSinkStatus([customSink, null])).toBeNull();
  });

  it('sums the counters, takes the most attempts, and the first sink\'s mode and first-touch strategy', () => {
    const events = kurrentSink({ mode: 'per-stream', attempts: 1, retries: 3, cachedStreams: 10, appendedEvents: 100, skippedEvents: 4, tailReads: 5, framedTailReads: 3, framedAppends: 40, logHeadReads: 1, firstTouch: 'read', splitCalls: 1 });
    const checkpoints = kurrentSink({ mode: 'multi-stream', attempts: 4, retries: 2, cachedStreams: 1, appendedEvents: 7, skippedEvents: 1, tailReads: 1, framedTailReads: 1, framedAppends: 2, firstTouch: 'optimistic' });
    expect(aggregateSinkStatus([events, checkpoints])).toEqual({
      mode: 'per-stream',
      state: 'connected',
      attempts: 4,
      retries: 5,
      lastError: null,
      cachedStreams: 11,
      appendedEvents: 107,
      skippedEvents: 5,
      tailReads: 6,
      framedTailReads: 4,
      framedAppends: 42,
      logHeadReads: 1,
      firstTouch: 'read',
      splitCalls: 1,
    });
  });

  it('is retrying when either sink is, closed only when both are', () => {
    const state = (a: SinkStatus['state'], b: SinkStatus['state']) => aggregateSinkStatus([kurrentSink({ state: a }), kurrentSink({ state: b })])!.state;
    expect(state('connected', 'retrying')).toBe('retrying');
    expect(state('retrying', 'closed')).toBe('retrying');
    expect(state('closed', 'connected')).toBe('connected');
    expect(state('closed', 'closed')).toBe('closed');
  });

  it('shows the newest last error of either sink', () => {
    const older = { message: 'unavailable', code: 'UNAVAILABLE', at: new Date('2026-01-15T10:00:00Z') };
    const newer = { message: 'deadline exceeded', code: null, at: new Date('2026-01-15T10:00:05Z') };
    expect(aggregateSinkStatus([kurrentSink({ lastError: newer }), kurrentSink({ lastError: older })])!.lastError).toBe(newer);
    expect(aggregateSinkStatus([kurrentSink({ lastError: older }), kurrentSink({ lastError: newer })])!.lastError).toBe(newer);
    expect(aggregateSinkStatus([kurrentSink({}), kurrentSink({ lastError: older })])!.lastError).toBe(older);
  });

  it('leaves a custom sink out and shows the KurrentDB one alone', () => {
    const only = kurrentSink({ appendedEvents: 9, state: 'retrying' });
    expect(aggregateSinkStatus([customSink, only])).toMatchObject({ appendedEvents: 9, state: 'retrying', mode: 'multi-stream' });
    expect(aggregateSinkStatus([customSink, only])).not.toHaveProperty('firstTouch');
  });
});

describe('batchingStatus', () => {
  const appender = (stats: Appender['stats']): Appender => ({
    stats,
    inFlight: 0,
    append: () => Promise.reject(new Error('not used')),
    appendTo: () => {
      throw new Error('not used');
    },
    drain: () => Promise.resolve(),
    whenBelow: () => Promise.resolve(),
  });

  it('is all zero (and no ratio) before an appender exists or made a call', () => {
    expect(batchingStatus(null)).toEqual({ calls: 0, unitsPerCall: null, largestBatch: 0 });
    expect(batchingStatus(appender({ calls: 0, units: 0, largestBatch: 0 }))).toEqual({ calls: 0, unitsPerCall: null, largestBatch: 0 });
  });

  it('gives units per call to one decimal, and the largest batch', () => {
    expect(batchingStatus(appender({ calls: 3, units: 10, largestBatch: 6 }))).toEqual({ calls: 3, unitsPerCall: 3.3, largestBatch: 6 });
    expect(batchingStatus(appender({ calls: 4, units: 1_000, largestBatch: 512 }))).toEqual({ calls: 4, unitsPerCall: 250, largestBatch: 512 });
  });
});
