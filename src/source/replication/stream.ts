/**
 * The replication stream: runs one replication connection after another (connection.ts) until
 * closed or a fatal error, asking the reconnect policy (reconnect-policy.ts) whether and when to
 * connect again, and owns what outlives a connection — the durable and received positions, the
 * pause flag, the session reported to the source.
 *
 * Why our own reader instead of pg-logical-replication's service: that service acks the
 * last *received* LSN from a timer (even with `auto: false`), ignores keepalives that ask
 * for a reply, and cannot parse protocol-v2 stream messages. Here the standby status
 * update always reports the durable position (what downstream acknowledged), keepalives
 * are answered, and the session is re-established with backoff after a connection loss.
 *
 * A slot streamed by another connection (55006, SlotActiveError) is no connection loss: the
 * stream asks again every `slotPollIntervalMs` without growing the backoff, and tells
 * `onSlotActive` who holds it — another process (the caller is a standby), or the walsender of
 * one of this stream's own lost sessions that PostgreSQL has not ended yet.
 */
import { formatLsn, parseLsn } from '../position.js';
import { openReplicationConnection, type ReplicationConnection } from './connection.js';
import { SlotActiveError, slotActivePid, toError } from './errors.js';
import { createShutdownPingDetector } from './feedback.js';
import { createReconnectPolicy } from './reconnect-policy.js';
import type { ReplicationSession, ReplicationStream, ReplicationStreamOptions, WalPositions } from './types.js';

export function createReplicationStream(options: ReplicationStreamOptions): ReplicationStream {
  const durable = options.startLsn ? parseLsn(options.startLsn) : 0n;
  const positions: WalPositions = { durable, received: durable, lastReported: -1n };
  const policy = createReconnectPolicy(options.backoff, Math.random, options.slotPollIntervalMs);
  /** Walsender pids of this stream's sessions: a slot still held by one of them is held by a connection of ours that was lost. */
  const ownWalsenders = new Set<number>();
  const shutdownPings = createShutdownPingDetector();
  let current: ReplicationConnection | null = null;
  let closed = false;
  let fatal = false;
  let paused = false;
  let session: ReplicationSession | null = null;
  let sessions = 0;
  let reconnectTimer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;

  function cleanupConnection(): Promise<void> {
    const connection = current;
    current = null;
    return connection ? connection.end() : Promise.resolve();
  }

  function failFatal(error: Error): void {
    if (fatal || closed) return;
    fatal = true;
    void cleanupConnection();
    options.onFatal(error);
  }

  function connect(): ReplicationConnection {
    return openReplicationConnection({
      options,
      positions,
      shutdownPings,
      isClosed: () => closed,
      isStopped: () => closed || fatal,
      isPaused: () => paused,
      nextSessionNumber: () => ++sessions,
      ownWalsender: (pid) => void ownWalsenders.add(pid),
      isOwnWalsender: (pid) => ownWalsenders.has(pid),
      onSession(s) {
        session = s;
        options.onSession(s);
      },
      onStreaming() {
        policy.reset();
        options.onStreaming?.();
      },
      onFatal: failFatal,
    });
  }

  function loop(): void {
    if (closed || fatal) return;
    let run: Promise<void>;
    try {
      current = connect();
      run = current.run();
    } catch (error) {
      run = Promise.reject(error); // a bad client configuration: decided like any failed session
    }
    running = run.then(
      () => {
        void cleanupConnection();
        if (!closed && !fatal) scheduleReconnect(new Error('replication stream ended'));
      },
      (error: unknown) => {
        void cleanupConnection();
        if (closed || fatal) return;
        const err = toError(error);
        const decision = policy.afterFailure(err);
        if (decision.action === 'fail') failFatal(err);
        else if (decision.action === 'poll') {
          options.onSlotActive?.(asSlotActive(err), decision.delayMs);
          schedule(decision.delayMs);
        } else {
          options.onDisconnect?.(err, decision.delayMs, decision.attempt);
          schedule(decision.delayMs);
        }
      },
    );
  }

  function asSlotActive(error: Error): SlotActiveError {
    if (error instanceof SlotActiveError) return error;
    const pid = slotActivePid(error) ?? 0;
    return new SlotActiveError(options.slot, { pid, client: null, applicationName: null, ours: ownWalsenders.has(pid) });
  }

  function scheduleReconnect(error: Error): void {
    const { delayMs, attempt } = policy.next();
    options.onDisconnect?.(error, delayMs, attempt);
    schedule(delayMs);
  }

  function schedule(delayMs: number): void {
    if (closed || fatal) return;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = null;
      loop();
    }, delayMs);
  }

  return {
    start() {
      if (running || closed) return;
      loop();
    },
    confirm(lsn) {
      const position = parseLsn(lsn);
      if (position <= positions.durable) return;
      positions.durable = position;
      current?.scheduleFeedback();
    },
    pause() {
      paused = true;
      current?.pause();
    },
    resume() {
      paused = false;
      current?.resume();
    },
    get paused() {
      return paused;
    },
    get connected() {
      return current?.streaming ?? false;
    },
    get durableLsn() {
      return formatLsn(positions.durable);
    },
    get receivedLsn() {
      return formatLsn(positions.received);
    },
    get session() {
      return session;
    },
    get reconnects() {
      return policy.reconnects;
    },
    async close() {
      if (closed) return;
      // Report the final durable position before hanging up.
      if (positions.durable !== positions.lastReported) current?.sendStatus();
      closed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      reconnectTimer = null;
      await cleanupConnection();
      await running?.catch(() => {});
    },
  };
}
