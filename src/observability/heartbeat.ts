/**
 * The heartbeat writer: every `intervalMs` while the pipeline runs, one transactional logical
 * message into the WAL (source/heartbeat.ts) on the observability's own connection. It comes
 * back through the slot like any transaction, is acknowledged without being mapped, and its
 * commit time becomes the newest durable source commit — so freshness stays low on an idle
 * database and grows when the pipeline is stuck. A failed write (database down, a read-only
 * server, EXECUTE revoked) is counted and logged once per distinct cause; the next tick tries again.
 */
import { HEARTBEAT_SQL, heartbeatParams } from '../source/heartbeat.js';
import type { Logger } from '../pipeline/logger.js';
import type { SideConnection } from './side-connection.js';

export interface HeartbeatStatus {
  readonly intervalMs: number;
  /** Heartbeats written. */
  readonly sent: number;
  /** Writes that failed. */
  readonly failures: number;
  /** When the last one was written (ISO), and its LSN. */
  readonly lastSentAt: string | null;
  readonly lastLsn: string | null;
  /** Why the last write failed (`null` once one succeeds again). */
  readonly lastError: string | null;
}

export interface HeartbeatWriter {
  status(): HeartbeatStatus;
  close(): Promise<void>;
}

export function startHeartbeat(options: {
  readonly assembler: string;
  readonly intervalMs: number;
  readonly connection: SideConnection;
  readonly log: Logger;
  /** Beat only while this says so (the pipeline runs and streams). */
  readonly active: () => boolean;
}): HeartbeatWriter {
  let sent = 0;
  let failures = 0;
  let lastSentAt: string | null = null;
  let lastLsn: string | null = null;
  let lastError: string | null = null;
  let beating: Promise<void> | null = null;

  async function beat(): Promise<void> {
    try {
      const lsn = await options.connection.use(async (client) => {
        const { rows } = await client.query<{ lsn: string }>(HEARTBEAT_SQL, heartbeatParams(options.assembler));
        return rows[0]!.lsn;
      });
      sent += 1;
      lastSentAt = new Date().toISOString();
      lastLsn = lsn;
      if (lastError !== null) options.log.info('observability: heartbeat written again', { lsn });
      lastError = null;
    } catch (error) {
      failures += 1;
      const message = error instanceof Error ? error.message : String(error);
      if (message !== lastError) {
        options.log.warn('observability: heartbeat could not be written; freshness then rests on real commits only (docs/operations.md "Heartbeat")', { error: message, failures });
      }
      lastError = message;
    }
  }

  const tick = (): void => {
    if (beating || !options.active()) return;
    beating = beat().finally(() => (beating = null));
  };
  const timer = setInterval(tick, options.intervalMs);
  timer.unref?.();
  // The first one as soon as the pipeline streams, so freshness is known early.
  const early = setInterval(() => {
    if (!options.active()) return;
    clearInterval(early);
    tick();
  }, Math.min(250, options.intervalMs));
  early.unref?.();

  return {
    status: () => ({ intervalMs: options.intervalMs, sent, failures, lastSentAt, lastLsn, lastError }),
    async close() {
      clearInterval(timer);
      clearInterval(early);
      await beating;
    },
  };
}
