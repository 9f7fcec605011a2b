// Runs every conformance case against a fresh in-memory KurrentDB (one server per case, on a
// free port), through the real @kurrent/kurrentdb-client.
import { afterAll, describe, test } from 'vitest';
import { startInMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { cases } from './cases.js';
import { REAL_DEFAULT_MAX_APPEND_SIZE, runCase, type ConformanceCase, type OpenServer } from './harness.js';

type InMemoryServer = Awaited<ReturnType<typeof startInMemoryKurrentDB>>;

const open = new Set<InMemoryServer>();

async function openServer(c: ConformanceCase): Promise<OpenServer> {
  const maxAppendSize = c.options?.maxAppendSize ?? REAL_DEFAULT_MAX_APPEND_SIZE;
  const server = await startInMemoryKurrentDB({
    maxAppendSize,
    ...(c.options?.features ? { features: c.options.features } : {}),
  });
  open.add(server);
  return {
    connectionString: server.connectionString,
    maxAppendSize,
    restart: () => server.restart(),
    inMemory: {
      stop: () => server.stop(),
      start: () => server.start(),
      failNextAppends: (count, kind) => server.failNextAppends(count, kind),
      setAppendLatency: (ms) => server.setAppendLatency(ms),
    },
    release: async () => {
      open.delete(server);
      await server.close();
    },
  };
}

afterAll(async () => {
  for (const server of open) await server.close().catch(() => undefined);
  open.clear();
});

describe('KurrentDB conformance against the in-memory server', () => {
  for (const c of cases) {
    test(`[${c.rule}] ${c.name}`, async () => {
      const server = await openServer(c);
      try {
        await runCase(c, server);
      } finally {
        await server.release();
      }
    }, 60_000);
  }
});
