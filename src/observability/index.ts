/**
 * Stage `observability/`: what operators see of a running assembler — Prometheus metrics,
 * `/healthz`, `/readyz`, `/status.json`, the freshness heartbeat — and the slot reading the
 * `status` command shares. Files, one job each:
 *
 * - `observability.ts` — the wiring (started and closed by the assembler);
 * - `http-listener.ts` — the node:http listener and its routes;
 * - `metrics.ts` — the prom-client registry (one per assembler) and every metric;
 * - `signals.ts` — the status document all endpoints read; `readiness.ts` — health and readiness;
 * - `slot-reading.ts` / `slot-probe.ts` — the slot's signals from PostgreSQL, cached per second;
 * - `heartbeat.ts` — the heartbeat writer; `side-connection.ts` — its own small connection;
 * - `rates.ts` — per-second rates from successive readings.
 *
 * This file only re-exports.
 */
export { createObservability, type Observability, type ObservabilityOptions } from './observability.js';
export { createAssemblerMetrics, type AssemblerMetrics } from './metrics.js';
export { statusDocument, type SignalInputs } from './signals.js';
export { health, readiness } from './readiness.js';
export { readSlot, WAL_STATUSES } from './slot-reading.js';
export { createRateTracker, type RateTracker } from './rates.js';
export type { ObservabilityAddress, StatusDocument, SnapshotTableSignal, HeartbeatStatus, SlotReading, SlotDecodingStats, WalStatus } from './types.js';
