// `npm run test:containers`: runs the conformance cases against a real KurrentDB in a container
// (testcontainers). Without a reachable Docker engine it says so and exits 0 — it never
// pretends the suite ran.
import { existsSync } from 'node:fs';
import { cases } from './cases.js';
import { runAll, waitFor, type ConformanceCase, type OpenServer, type Target } from './harness.js';

const IMAGE = process.env.KURRENTDB_IMAGE ?? 'docker.kurrent.io/kurrent-latest/kurrentdb:latest';
/** Small enough that the max-append-size case can exceed it cheaply; every other case stays far below. */
const MAX_APPEND_SIZE = 64 * 1024;
const CASE_TIMEOUT_MS = 120_000;

const NO_DOCKER =
  'No Docker engine found: the conformance suite did not run against a real KurrentDB (it runs against the in-memory server in npm test).';

async function dockerReachable(): Promise<boolean> {
  const hasEndpoint =
    Boolean(process.env.DOCKER_HOST) ||
    existsSync('/var/run/docker.sock') ||
    existsSync(`${process.env.HOME ?? ''}/.docker/run/docker.sock`) ||
    existsSync(`${process.env.XDG_RUNTIME_DIR ?? '/nonexistent'}/docker.sock`) ||
    existsSync(`${process.env.XDG_RUNTIME_DIR ?? '/nonexistent'}/podman/podman.sock`);
  if (!hasEndpoint) return false;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('container runtime check timed out')), 30_000);
    });
    try {
      await Promise.race([getContainerRuntimeClient(), timeout]);
    } finally {
      clearTimeout(timer);
    }
    return true;
  } catch (error) {
    console.error(`container runtime check failed: ${error instanceof Error ? error.message : String(error)}`);
    return false;
  }
}

async function main(): Promise<number> {
  if (!(await dockerReachable())) {
    console.log(NO_DOCKER);
    return 0;
  }

  const { GenericContainer, Wait } = await import('testcontainers');
  console.log(`starting ${IMAGE} …`);
  const container = await new GenericContainer(IMAGE)
    .withEnvironment({
      KURRENTDB_CLUSTER_SIZE: '1',
      KURRENTDB_INSECURE: 'true',
      KURRENTDB_RUN_PROJECTIONS: 'None',
      KURRENTDB_MAX_APPEND_SIZE: String(MAX_APPEND_SIZE),
      // must not exceed MAX_APPEND_SIZE (ClusterVNodeOptionsValidator), default is 16 MiB
      KURRENTDB_MAX_APPEND_EVENT_SIZE: String(MAX_APPEND_SIZE),
    })
    .withExposedPorts(2113)
    .withWaitStrategy(Wait.forHttp('/health/live', 2113).forStatusCode(204))
    .withStartupTimeout(180_000)
    .start();

  const server: OpenServer = {
    // the mapped port can change across a container restart: read it each time
    get connectionString() {
      return `kurrentdb://${container.getHost()}:${container.getMappedPort(2113)}?tls=false`;
    },
    maxAppendSize: MAX_APPEND_SIZE,
    restart: async () => {
      // a process restart: the database files stay in the container, memory (caches) goes
      await container.restart();
      await waitFor(
        async () => {
          const url = `http://${container.getHost()}:${container.getMappedPort(2113)}/health/live`;
          const response = await globalThis.fetch(url).catch(() => undefined);
          return response?.status === 204;
        },
        { what: 'KurrentDB /health/live after the restart', timeoutMs: 180_000, intervalMs: 500 },
      );
    },
    release: async () => undefined,
  };

  const target: Target = {
    name: 'kurrentdb',
    skipReason(c: ConformanceCase) {
      if (c.target === 'in-memory') return 'fault injection exists only in the in-memory server';
      if (c.needs?.includes('features')) return 'a real KurrentDB cannot switch off BatchAppend or AppendSession';
      if (c.options?.maxAppendSize !== undefined && c.options.maxAppendSize !== MAX_APPEND_SIZE) {
        return `the container runs with maxAppendSize ${MAX_APPEND_SIZE}, the case asks for ${c.options.maxAppendSize}`;
      }
      return undefined;
    },
    open: async () => server,
  };

  let summary;
  try {
    summary = await runAll(cases, target, CASE_TIMEOUT_MS);
  } finally {
    await container.stop().catch(() => undefined);
  }
  const { passed, failed, skipped } = summary;
  console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
  return failed > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
