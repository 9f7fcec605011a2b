/**
 * What one replication connection tells the server: standby status updates of the durable
 * position — on a period (so a paused reader is not dropped at wal_sender_timeout), shortly
 * after an acknowledgement (coalesced), and on request — and the answer to keepalives: while
 * nothing is in flight, keepalive positions are acknowledged so an idle slot does not pin WAL.
 * The status update always reports the durable position, never the last received one.
 */
import { formatLsn } from '../position.js';
import type { WalPositions } from './types.js';
import { standbyStatusUpdate } from './wire.js';

/** Reply requests for the same position within this window that mean "the walsender is shutting down". */
const SHUTDOWN_PING_COUNT = 5;
const SHUTDOWN_PING_WINDOW_MS = 2_000;

export interface ShutdownPingDetector {
  /** Notes a reply request for `walEnd` that cannot be answered with it; true when the walsender is shutting down. */
  note(walEnd: bigint): boolean;
}

/**
 * A shutting-down walsender (`WalSndDone`) exits only once the reported flush position
 * reaches everything it sent, asking for a reply again and again meanwhile; it holds up
 * the server's shutdown checkpoint until then. While transactions are in flight we must
 * not report that position, so we hang up instead, let the server stop, and reconnect
 * (the unacknowledged transactions are re-sent). Normal operation sees a reply request
 * at most every wal_sender_timeout/2, never several within a second or two.
 */
export function createShutdownPingDetector(now: () => number = Date.now): ShutdownPingDetector {
  let run = { walEnd: -1n, count: 0, since: 0 };
  return {
    note(walEnd) {
      const t = now();
      if (run.walEnd !== walEnd || t - run.since > SHUTDOWN_PING_WINDOW_MS) run = { walEnd, count: 0, since: t };
      run.count += 1;
      if (run.count < SHUTDOWN_PING_COUNT) return false;
      run = { walEnd: -1n, count: 0, since: 0 };
      return true;
    },
  };
}

/**
 * The position a keepalive for `walEnd` lets us acknowledge, or -1 for none: only while idle
 * (everything up to walEnd was delivered and acknowledged, or filtered out by the publication),
 * capped by `idleLimit`. The callbacks are asked only when needed.
 */
export function idleAcknowledgeTarget(walEnd: bigint, durable: bigint, isIdle: () => boolean, idleLimit?: () => bigint | null): bigint {
  if (walEnd <= durable || !isIdle()) return -1n;
  const cap = idleLimit?.() ?? null;
  return cap !== null && cap < walEnd ? cap : walEnd;
}

export interface StandbyFeedbackOptions {
  readonly positions: WalPositions;
  readonly statusIntervalMs: number;
  readonly feedbackDelayMs: number;
  /** Writes a CopyData message to the server; throws when the socket is gone. */
  send(message: Buffer): void;
  isIdle(): boolean;
  idleLimit?(): bigint | null;
  readonly shutdownPings: ShutdownPingDetector;
  /** The walsender is shutting down and waits for a position that is not durable: hang up. */
  onShutdownWait(error: Error): void;
}

export interface StandbyFeedback {
  /** Replication started: status updates begin (one now, then every statusIntervalMs). */
  start(): void;
  /** Sends a status update of the durable position now (while streaming). */
  sendStatus(replyRequested?: boolean): void;
  /** The durable position moved: report it within feedbackDelayMs. */
  schedule(): void;
  /** A primary keepalive. */
  keepalive(walEnd: bigint, replyRequested: boolean): void;
  /** The connection is gone: no more updates. */
  stop(): void;
  /** True between start() and stop(). */
  readonly streaming: boolean;
}

export function createStandbyFeedback(options: StandbyFeedbackOptions): StandbyFeedback {
  const positions = options.positions;
  let streaming = false;
  let statusTimer: NodeJS.Timeout | null = null;
  let feedbackTimer: NodeJS.Timeout | null = null;

  function sendStatus(replyRequested = false): void {
    if (!streaming) return;
    if (feedbackTimer) {
      clearTimeout(feedbackTimer);
      feedbackTimer = null;
    }
    try {
      options.send(standbyStatusUpdate(formatLsn(positions.durable), replyRequested));
      positions.lastReported = positions.durable;
    } catch {
      // The socket is gone; the close handler reconnects.
    }
  }

  function noteUnanswerablePing(walEnd: bigint): void {
    if (!options.shutdownPings.note(walEnd)) return;
    options.onShutdownWait(Object.assign(new Error('the server is shutting down and waits for a flush position that is not durable yet; disconnecting to let it stop'), { code: '57P01' }));
  }

  return {
    start() {
      streaming = true;
      sendStatus();
      statusTimer = setInterval(() => sendStatus(), options.statusIntervalMs);
    },
    sendStatus,
    schedule() {
      if (feedbackTimer || !streaming) return;
      feedbackTimer = setTimeout(() => {
        feedbackTimer = null;
        if (positions.durable !== positions.lastReported) sendStatus();
      }, options.feedbackDelayMs);
    },
    keepalive(walEnd, replyRequested) {
      if (walEnd > positions.received) positions.received = walEnd;
      const idleTarget = idleAcknowledgeTarget(walEnd, positions.durable, () => options.isIdle(), options.idleLimit && (() => options.idleLimit?.() ?? null));
      if (idleTarget > positions.durable) {
        positions.durable = idleTarget;
        sendStatus();
        if (replyRequested && walEnd > positions.durable) noteUnanswerablePing(walEnd);
      } else if (replyRequested) {
        sendStatus();
        if (walEnd > positions.durable) noteUnanswerablePing(walEnd);
      }
    },
    stop() {
      streaming = false;
      if (statusTimer) clearInterval(statusTimer);
      if (feedbackTimer) clearTimeout(feedbackTimer);
      statusTimer = null;
      feedbackTimer = null;
    },
    get streaming() {
      return streaming;
    },
  };
}
