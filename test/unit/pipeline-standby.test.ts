// The standby's role and what it logs: once on entering standby (again only when the holder
// changes), never per poll; once on taking over, with how long it stood by.
import { describe, expect, it } from 'vitest';
import { silentLogger, type Logger } from '../../src/pipeline/logger.js';
import { createStandbyTracker } from '../../src/pipeline/standby.js';
import { describeSlotHolder } from '../../src/source/index.js';

function recordingLog(): Logger & { lines: { level: string; message: string; fields: Record<string, unknown> | undefined }[] } {
  const lines: { level: string; message: string; fields: Record<string, unknown> | undefined }[] = [];
  return {
    ...silentLogger,
    lines,
    info: (message, fields) => void lines.push({ level: 'info', message, fields }),
    warn: (message, fields) => void lines.push({ level: 'warn', message, fields }),
  };
}

const leader = { pid: 4711, client: '10.0.0.5:53422', applicationName: null, ours: false };

describe('standby tracker', () => {
  it('starts as starting; a free slot at once makes a leader without a takeover line', () => {
    const log = recordingLog();
    const tracker = createStandbyTracker(log, 'shop');
    expect(tracker.role).toBe('starting');
    tracker.leading();
    expect(tracker.role).toBe('leader');
    expect(log.lines).toEqual([]);
  });

  it('logs one INFO line on entering standby, none per poll, and one when the holder changes', () => {
    const log = recordingLog();
    const tracker = createStandbyTracker(log, 'shop');
    for (let poll = 0; poll < 5; poll++) tracker.standingBy(leader);
    expect(tracker.role).toBe('standby');
    expect(tracker.holder).toEqual(leader);
    expect(log.lines).toEqual([
      { level: 'info', message: 'slot "shop" is active for pid 4711 on 10.0.0.5:53422: standing by', fields: { slot: 'shop', holder: { pid: 4711, client: '10.0.0.5:53422', applicationName: null } } },
    ]);
    // Another standby took over meanwhile: this one now waits behind it.
    tracker.standingBy({ ...leader, pid: 4800, client: '10.0.0.6:40000' });
    tracker.standingBy({ ...leader, pid: 4800, client: '10.0.0.6:40000' });
    expect(log.lines.map((l) => l.message)).toEqual([
      'slot "shop" is active for pid 4711 on 10.0.0.5:53422: standing by',
      'slot "shop" is active for pid 4800 on 10.0.0.6:40000: standing by',
    ]);
  });

  it('logs "took over the slot after N s" once, with the standby time and the start-up after the slot freed', () => {
    const log = recordingLog();
    let now = 1_000_000;
    const tracker = createStandbyTracker(log, 'shop', () => now);
    tracker.standingBy(leader);
    now += 11_000;
    tracker.standingBy(leader);
    now += 1_000;
    tracker.slotFree();
    now += 300;
    tracker.leading();
    expect(tracker.role).toBe('leader');
    expect(tracker.holder).toBeNull();
    expect(log.lines[1]).toEqual({
      level: 'info',
      message: 'took over the slot after 12.3 s',
      fields: { slot: 'shop', standbyMs: 12_300, freeToStreamingMs: 300, previousHolder: { pid: 4711, client: '10.0.0.5:53422', applicationName: null } },
    });
    // A reconnect of the leader's own session is no takeover.
    tracker.leading();
    expect(log.lines).toHaveLength(2);
  });

  it("warns once while the slot is held by this process's own lost connection, again after streaming", () => {
    const log = recordingLog();
    const tracker = createStandbyTracker(log, 'shop');
    tracker.leading();
    const own = { ...leader, ours: true };
    tracker.ownConnectionHolds(own);
    tracker.ownConnectionHolds(own);
    expect(tracker.role).toBe('leader');
    expect(log.lines.map((l) => [l.level, l.message])).toEqual([['warn', `source: slot "shop" is still held by this process's lost connection (pid 4711 on 10.0.0.5:53422); waiting for PostgreSQL to end it`]]);
    tracker.leading();
    tracker.ownConnectionHolds(own);
    expect(log.lines).toHaveLength(2);
  });
});

describe('describeSlotHolder', () => {
  it.each([
    ['a TCP client', { pid: 1, client: '10.0.0.5:53422', applicationName: null }, 'pid 1 on 10.0.0.5:53422'],
    ['a named application', { pid: 2, client: '[::1]:5000', applicationName: 'event-assembler' }, 'pid 2 on [::1]:5000 (event-assembler)'],
    ['a Unix socket', { pid: 3, client: 'local socket', applicationName: null }, 'pid 3 on local socket'],
    ['a holder this role may not see', { pid: 4, client: null, applicationName: null }, 'pid 4 on an unknown client (not visible to this role)'],
  ])('%s', (_name, holder, text) => {
    expect(describeSlotHolder(holder)).toBe(text);
  });
});
