import { afterEach, describe, expect, it, vi } from 'vitest';
import { createShutdownPingDetector, createStandbyFeedback, idleAcknowledgeTarget, type StandbyFeedbackOptions } from '../../src/source/replication/feedback.js';
import type { WalPositions } from '../../src/source/replication/types.js';
import { standbyStatusUpdate, startReplicationSql } from '../../src/source/replication/wire.js';

/** The flush position a standby status update reports. */
const flushOf = (message: Buffer) => message.readBigUInt64BE(9);

afterEach(() => {
  vi.useRealTimers();
});

describe('standby status update and START_REPLICATION', () => {
  it('reports one position as written, flushed and applied', () => {
    const m = standbyStatusUpdate('0/1A2B3C', true, Date.UTC(2000, 0, 1, 0, 0, 1));
    expect(m).toHaveLength(34);
    expect(m.toString('latin1', 0, 1)).toBe('r');
    expect([m.readBigUInt64BE(1), m.readBigUInt64BE(9), m.readBigUInt64BE(17)]).toEqual([0x1a2b3cn, 0x1a2b3cn, 0x1a2b3cn]);
    expect(m.readBigInt64BE(25)).toBe(1_000_000n);
    expect(m.readUInt8(33)).toBe(1);
  });

  it('quotes the slot and publications and asks for streaming only with protocol 2', () => {
    const base = { slot: 'my_slot', publications: ['pub', 'we"ird'], messages: true, streaming: true } as const;
    expect(startReplicationSql({ ...base, protocolVersion: 2 }, 0x10n)).toBe(
      `START_REPLICATION SLOT "my_slot" LOGICAL 0/10 (proto_version '2', publication_names '"pub","we""ird"', messages 'true', streaming 'on')`,
    );
    expect(startReplicationSql({ ...base, protocolVersion: 1 }, 0x10n)).not.toContain('streaming');
  });
});

describe('idle acknowledgements', () => {
  it('acknowledges a keepalive position only while idle, capped by the idle limit', () => {
    expect(idleAcknowledgeTarget(100n, 50n, () => true)).toBe(100n);
    expect(idleAcknowledgeTarget(100n, 50n, () => false)).toBe(-1n);
    expect(idleAcknowledgeTarget(100n, 50n, () => true, () => 80n)).toBe(80n);
    expect(idleAcknowledgeTarget(100n, 50n, () => true, () => 200n)).toBe(100n);
  });

  it('asks neither callback when the keepalive is not ahead of the durable position', () => {
    const isIdle = vi.fn(() => true);
    const limit = vi.fn(() => null);
    expect(idleAcknowledgeTarget(50n, 50n, isIdle, limit)).toBe(-1n);
    expect(isIdle).not.toHaveBeenCalled();
    expect(limit).not.toHaveBeenCalled();
  });
});

describe('shutdown detection', () => {
  it('spots five reply requests for one position within two seconds, then starts over', () => {
    let now = 0;
    const detector = createShutdownPingDetector(() => now);
    const answers = [];
    for (let i = 0; i < 5; i++) {
      answers.push(detector.note(7n));
      now += 100;
    }
    expect(answers).toEqual([false, false, false, false, true]);
    expect(detector.note(7n)).toBe(false);
  });

  it('does not count requests for another position or outside the window', () => {
    let now = 0;
    const detector = createShutdownPingDetector(() => now);
    for (let i = 0; i < 4; i++) detector.note(7n);
    expect(detector.note(8n)).toBe(false); // another position: a new run
    for (let i = 0; i < 3; i++) detector.note(8n);
    now += 2_001;
    expect(detector.note(8n)).toBe(false); // the window passed: a new run
  });
});

describe('standby feedback', () => {
  function feedback(positions: WalPositions, overrides: Partial<StandbyFeedbackOptions> = {}) {
    const sent: Buffer[] = [];
    const onShutdownWait = vi.fn();
    const f = createStandbyFeedback({
      positions,
      statusIntervalMs: 10_000,
      feedbackDelayMs: 50,
      send: (m) => sent.push(m),
      isIdle: () => false,
      shutdownPings: createShutdownPingDetector(),
      onShutdownWait,
      ...overrides,
    });
    return { f, sent, onShutdownWait };
  }

  it('sends nothing before replication starts, then the durable position (never the received one)', () => {
    const positions = { durable: 10n, received: 90n, lastReported: -1n };
    const { f, sent } = feedback(positions);
    f.sendStatus();
    expect(sent).toEqual([]);
    f.start();
    expect(sent.map(flushOf)).toEqual([10n]);
    expect(positions.lastReported).toBe(10n);
    f.stop();
  });

  it('coalesces acknowledgements into one update after feedbackDelayMs, and repeats on the status period', () => {
    vi.useFakeTimers();
    const positions = { durable: 10n, received: 90n, lastReported: -1n };
    const { f, sent } = feedback(positions);
    f.start();
    positions.durable = 20n;
    f.schedule();
    positions.durable = 30n;
    f.schedule();
    vi.advanceTimersByTime(50);
    expect(sent.map(flushOf)).toEqual([10n, 30n]);
    vi.advanceTimersByTime(10_000);
    expect(sent.map(flushOf)).toEqual([10n, 30n, 30n]);
    f.stop();
    vi.advanceTimersByTime(20_000);
    expect(sent).toHaveLength(3);
    expect(f.streaming).toBe(false);
  });

  it('answers a keepalive: acknowledges its position while idle, otherwise only replies when asked', () => {
    const positions = { durable: 10n, received: 10n, lastReported: -1n };
    let idle = false;
    const { f, sent } = feedback(positions, { isIdle: () => idle });
    f.start();
    f.keepalive(40n, false);
    expect(positions).toMatchObject({ durable: 10n, received: 40n });
    expect(sent).toHaveLength(1);
    f.keepalive(40n, true);
    expect(sent.map(flushOf)).toEqual([10n, 10n]);
    idle = true;
    f.keepalive(50n, false);
    expect(positions.durable).toBe(50n);
    expect(sent.map(flushOf)).toEqual([10n, 10n, 50n]);
    f.stop();
  });

  it('hangs up when a shutting-down walsender keeps asking for a position that is not durable', () => {
    const positions = { durable: 10n, received: 10n, lastReported: -1n };
    const { f, onShutdownWait } = feedback(positions);
    f.start();
    for (let i = 0; i < 4; i++) f.keepalive(40n, true);
    expect(onShutdownWait).not.toHaveBeenCalled();
    f.keepalive(40n, true);
    expect(onShutdownWait).toHaveBeenCalledOnce();
    expect(onShutdownWait.mock.calls[0]![0]).toMatchObject({ code: '57P01' });
    f.stop();
  });
});
