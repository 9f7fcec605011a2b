/**
 * Observability of one assembler, wired: its own PostgreSQL connection (slot readings and
 * heartbeats), the metrics registry, the heartbeat writer and the HTTP listener. The assembler
 * starts it before its pipeline (so `/healthz` and `/readyz` answer during start-up) and closes
 * it after. Nothing here is on the per-transaction path: the pipeline's own counters are read
 * when someone asks; only append calls report their duration (one histogram observation per call).
 */
import { EventAssemblerError } from '../errors.js';
import type { Logger } from '../pipeline/logger.js';
import type { AssemblerStatus } from '../pipeline/types.js';
import type { ObservabilityAddress } from './address.js';
import { startHeartbeat, type HeartbeatWriter } from './heartbeat.js';
import { startHttpListener, type HttpListener } from './http-listener.js';
import { createAssemblerMetrics, type AssemblerMetrics } from './metrics.js';
import { createRateTracker } from './rates.js';
import { createSideConnection } from './side-connection.js';
import { statusDocument } from './signals.js';
import { createMetricsHistory, type MetricsHistory } from './page/history.js';
import { createSlotProbe } from './slot-probe.js';
import type { StatusDocument } from './types.js';

/** Queries of the observability connection (slot reading, heartbeat) give up after this long. */
const QUERY_TIMEOUT_MS = 5_000;
/** Slot readings are reused for this long (Prometheus, /readyz and /status.json asked together). */
const SLOT_READING_MAX_AGE_MS = 1_000;
const SNAPSHOT_RATE_WINDOW_MS = 30_000;

export interface ObservabilityOptions {
  readonly name: string;
  readonly slot: string;
  readonly connection: string;
  readonly mappers: readonly string[];
  readonly host: string;
  readonly port: number;
  readonly heartbeatIntervalMs: number;
  readonly maxFreshnessMs: number;
  readonly log: Logger;
  status(): AssemblerStatus;
}

export interface Observability {
  /** Binds the listener and starts the heartbeat; rejects with OBSERVABILITY_LISTEN_FAILED. */
  start(): Promise<ObservabilityAddress>;
  /** `null` until the listener is bound. */
  readonly address: ObservabilityAddress | null;
  /** The signals now (what `/status.json` serves). */
  document(): Promise<StatusDocument>;
  /** The appender's hook: one append call took `seconds`. */
  observeAppend(seconds: number): void;
  close(): Promise<void>;
}

export function createObservability(options: ObservabilityOptions): Observability {
  const connection = createSideConnection(options.connection, { timeoutMs: QUERY_TIMEOUT_MS, applicationName: `event-assembler ${options.name} observability` });
  const probe = createSlotProbe(connection, options.slot, SLOT_READING_MAX_AGE_MS);
  const rates = createRateTracker(SNAPSHOT_RATE_WINDOW_MS);
  const metrics: AssemblerMetrics = createAssemblerMetrics({ mappers: options.mappers });
  let history: MetricsHistory | null = null;
  let listener: HttpListener | null = null;
  let heartbeat: HeartbeatWriter | null = null;
  const idleHeartbeat = { intervalMs: options.heartbeatIntervalMs, sent: 0, failures: 0, lastSentAt: null, lastLsn: null, lastError: null };

  async function document(): Promise<StatusDocument> {
    const result = await probe.read();
    return statusDocument({ status: options.status(), probe: result, heartbeat: heartbeat?.status() ?? idleHeartbeat, maxFreshnessMs: options.maxFreshnessMs, rates, now: Date.now() });
  }

  return {
    async start() {
      try {
        history = createMetricsHistory(metrics.registry, { refresh: async () => metrics.update(await document()) });
        listener = await startHttpListener({ host: options.host, port: options.port, document, metrics, history });
      } catch (error) {
        history?.close();
        await connection.close();
        const cause = error instanceof Error ? error.message : String(error);
        throw new EventAssemblerError('OBSERVABILITY_LISTEN_FAILED', `observability: cannot listen on ${options.host}:${options.port} (${cause}); choose another observability.port, or 0 for a free one`, { host: options.host, port: options.port });
      }
      heartbeat = startHeartbeat({
        assembler: options.name,
        intervalMs: options.heartbeatIntervalMs,
        connection,
        log: options.log,
        active: () => options.status().state === 'running',
      });
      options.log.info('observability: listening', { url: listener.address.url, host: listener.address.host, port: listener.address.port, heartbeatIntervalMs: options.heartbeatIntervalMs });
      return listener.address;
    },
    get address() {
      return listener?.address ?? null;
    },
    document,
    observeAppend: (seconds) => metrics.observeAppend(seconds),
    async close() {
      history?.close();
      await heartbeat?.close();
      await listener?.close();
      await connection.close();
    },
  };
}
