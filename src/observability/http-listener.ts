/**
 * The observability HTTP listener (node:http, no framework): `/metrics` (Prometheus text),
 * `/healthz`, `/readyz`, `/status.json`, and the status page — `/` with its script and uPlot
 * (page/assets.ts) and `/history.json`, its last hour (page/history.ts). Every request reads one fresh status document through `document()`. GET and HEAD
 * only; anything else is 405, an unknown path 404.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AssemblerMetrics } from './metrics.js';
import type { ObservabilityAddress } from './address.js';
import { statusPageAsset } from './page/assets.js';
import type { MetricsHistory } from './page/history.js';
import type { StatusDocument } from './types.js';

export interface HttpListener {
  readonly address: ObservabilityAddress;
  close(): Promise<void>;
}

export interface ListenerDeps {
  readonly host: string;
  readonly port: number;
  /** A fresh status document (the slot read at most once a second). */
  document(): Promise<StatusDocument>;
  readonly metrics: AssemblerMetrics;
  /** The status page's last hour (/history.json). */
  readonly history: MetricsHistory;
}

const JSON_TYPE = 'application/json; charset=utf-8';

function send(res: ServerResponse, status: number, type: string, body: string, head: boolean): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'content-length': Buffer.byteLength(body) });
  res.end(head ? undefined : body);
}

async function route(deps: ListenerDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const head = req.method === 'HEAD';
  if (req.method !== 'GET' && !head) {
    res.setHeader('allow', 'GET, HEAD');
    send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n', false);
    return;
  }
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  switch (path) {
    case '/metrics': {
      const doc = await deps.document();
      deps.metrics.update(doc);
      send(res, 200, deps.metrics.registry.contentType, await deps.metrics.registry.metrics(), head);
      return;
    }
    case '/healthz': {
      const { health, state } = await deps.document();
      send(res, health.ok ? 200 : 503, JSON_TYPE, `${JSON.stringify({ ok: health.ok, state, reason: health.reason })}\n`, head);
      return;
    }
    case '/readyz': {
      const { ready, state, role } = await deps.document();
      send(res, ready.ok ? 200 : 503, JSON_TYPE, `${JSON.stringify({ ok: ready.ok, state, role, reasons: ready.reasons })}\n`, head);
      return;
    }
    case '/status.json':
      send(res, 200, JSON_TYPE, `${JSON.stringify(await deps.document(), null, 2)}\n`, head);
      return;
    case '/history.json':
      send(res, 200, JSON_TYPE, `${JSON.stringify(deps.history.snapshot())}\n`, head);
      return;
    default: {
      const asset = statusPageAsset(path);
      if (asset) {
        res.writeHead(200, { 'content-type': asset.contentType, 'cache-control': 'no-store', 'content-length': Buffer.byteLength(asset.body) });
        res.end(head ? undefined : asset.body);
        return;
      }
      send(res, 404, 'text/plain; charset=utf-8', 'not found: try /, /metrics, /healthz, /readyz, /status.json\n', head);
    }
  }
}

/** Binds the listener; rejects when the port cannot be bound (in use, not permitted). */
export async function startHttpListener(deps: ListenerDeps): Promise<HttpListener> {
  const server: Server = createServer((req, res) => {
    route(deps, req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', `${error instanceof Error ? error.message : String(error)}\n`, false);
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.port, deps.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const host = bound.address;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${bound.port}`;
  return {
    address: { host, port: bound.port, url },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
