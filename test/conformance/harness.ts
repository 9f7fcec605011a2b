// The conformance harness: what a case may ask of the server it runs against, and how a
// runner (vitest against the in-memory server, or run-containers.ts against a real
// KurrentDB) drives one case. Nothing here depends on vitest, so the containers runner can
// use it with plain node.
import { randomUUID } from 'node:crypto';
import { KurrentDBClient, StreamNotFoundError } from '@kurrent/kurrentdb-client';

/** Capabilities a case can need beyond a plain connected client. */
export type Need =
  /** restart the server process: events kept, in-memory state (weak-idempotency cache) dropped */
  | 'restart'
  /** start the server with a small `maxAppendSize` (ConformanceOptions.maxAppendSize) */
  | 'maxAppendSize'
  /** start the server with features switched off (ConformanceOptions.features) */
  | 'features';

/** Server options a case asks for; a target that cannot honour them skips the case. */
export interface ConformanceOptions {
  maxAppendSize?: number;
  features?: { batchAppend?: boolean; multiStreamAppend?: boolean };
}

/** Fault-injection controls, only the in-memory server has them. */
export interface InMemoryControls {
  stop(): Promise<void>;
  start(): Promise<void>;
  failNextAppends(count: number, kind?: 'unavailable' | 'internal'): void;
  setAppendLatency(ms: number): void;
}

export interface ConformanceContext {
  /** The current connected client; replaced by restart()/reconnect(). */
  readonly client: KurrentDBClient;
  /** A stream-name prefix no other case uses, e.g. `c07-3f9a1b2c`. Build names as `${prefix}-x`. */
  readonly prefix: string;
  /** The effective limits of the server under test. */
  readonly limits: { readonly maxAppendSize: number };
  /** Restarts the server (data kept, caches dropped), then connects a fresh client. */
  restart(): Promise<void>;
  /** Disposes the current client and connects a fresh one. */
  reconnect(): Promise<KurrentDBClient>;
  /** Present only on the in-memory target. */
  readonly inMemory?: InMemoryControls;
}

export interface ConformanceCase {
  /** What the case checks, as a sentence. */
  name: string;
  /** The rule (a KurrentDB behaviour) it belongs to; every rule has at least one case. */
  rule: Rule;
  /** Server capabilities the case needs; a target lacking one skips the case with the reason. */
  needs?: Need[];
  /** `in-memory`: fault injection that only the in-memory server offers. Default: any target. */
  target?: 'any' | 'in-memory';
  /** Server options; the runner starts a server with these for this case. */
  options?: ConformanceOptions;
  run(ctx: ConformanceContext): Promise<void>;
}

export const RULES = [
  'expected-revision-any',
  'expected-revision-no-stream',
  'expected-revision-stream-exists',
  'expected-revision-numeric',
  'strong-idempotency',
  'weak-idempotency',
  'soft-delete',
  'tombstone',
  'stream-metadata',
  'max-append-size',
  'read-stream',
  'read-all',
  'subscribe-stream',
  'subscribe-all-filters',
  'subscribe-all-checkpoints',
  'append-protocol',
  'multi-stream-append',
  'bridge-reads',
  'fault-injection',
] as const;
export type Rule = (typeof RULES)[number];

/** What a runner knows about its target. */
export interface Target {
  readonly name: 'in-memory' | 'kurrentdb';
  /** Why this target can't run a case, or undefined when it can. */
  skipReason(c: ConformanceCase): string | undefined;
  /** Starts (or reuses) a server fit for the case. */
  open(c: ConformanceCase): Promise<OpenServer>;
}

export interface OpenServer {
  connectionString: string;
  maxAppendSize: number;
  restart(): Promise<void>;
  inMemory?: InMemoryControls;
  /** Releases what open() started for this case. */
  release(): Promise<void>;
}

/** Real KurrentDB's default max append size (ClusterVNodeOptions.MaxAppendSize = TFConsts.ChunkSize). */
export const REAL_DEFAULT_MAX_APPEND_SIZE = 256 * 1024 * 1024;

let caseCounter = 0;

/** Runs one case against an open server, disposing every client it made. */
export async function runCase(c: ConformanceCase, server: OpenServer): Promise<void> {
  caseCounter += 1;
  const prefix = `c${String(caseCounter).padStart(2, '0')}-${randomUUID().slice(0, 8)}`;
  const clients: KurrentDBClient[] = [];
  let current = await connect(server.connectionString);
  clients.push(current);

  const reconnect = async (): Promise<KurrentDBClient> => {
    await current.dispose().catch(() => undefined);
    current = await connect(server.connectionString);
    clients.push(current);
    return current;
  };

  const ctx: ConformanceContext = {
    get client() {
      return current;
    },
    prefix,
    limits: { maxAppendSize: server.maxAppendSize },
    restart: async () => {
      await current.dispose().catch(() => undefined);
      await server.restart();
      current = await connect(server.connectionString);
      clients.push(current);
    },
    reconnect,
    ...(server.inMemory ? { inMemory: server.inMemory } : {}),
  };
  try {
    await c.run(ctx);
  } finally {
    for (const client of clients) await client.dispose().catch(() => undefined);
  }
}

/**
 * Connects a client and waits until the server answers a read (a missing stream answers
 * StreamNotFound), so a case never races a server that is still starting.
 */
export async function connect(connectionString: string, timeoutMs = 60_000): Promise<KurrentDBClient> {
  const client = KurrentDBClient.connectionString(connectionString);
  const probe = `$conformance-probe-${randomUUID()}`;
  let lastError: unknown;
  const ready = await waitFor(
    async () => {
      try {
        for await (const _ of client.readStream(probe, { maxCount: 1 })) break;
        return true;
      } catch (error) {
        if (error instanceof StreamNotFoundError) return true;
        lastError = error;
        return false;
      }
    },
    { timeoutMs, what: 'the server to answer reads', throwOnTimeout: false },
  );
  if (!ready) {
    await client.dispose().catch(() => undefined);
    throw new Error(`server at ${connectionString} did not answer reads within ${timeoutMs} ms: ${String(lastError)}`);
  }
  return client;
}

/** Polls `condition` until it is true or the deadline passes. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  opts: { timeoutMs?: number; intervalMs?: number; what: string; throwOnTimeout?: boolean },
): Promise<boolean> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  const interval = opts.intervalMs ?? 20;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() >= deadline) {
      if (opts.throwOnTimeout === false) return false;
      throw new Error(`timed out after ${opts.timeoutMs ?? 10_000} ms waiting for ${opts.what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

/** Runs the cases one after another against a target, printing one line per case. */
export async function runAll(
  all: readonly ConformanceCase[],
  target: Target,
  caseTimeoutMs: number,
  log: (line: string) => void = (line) => console.log(line),
): Promise<{ passed: number; failed: number; skipped: number }> {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const c of all) {
    const label = `[${c.rule}] ${c.name}`;
    const reason = target.skipReason(c);
    if (reason) {
      skipped += 1;
      log(`skip ${label} — ${reason}`);
      continue;
    }
    const started = Date.now();
    try {
      const server = await target.open(c);
      try {
        await withTimeout(runCase(c, server), caseTimeoutMs, label);
      } finally {
        await server.release();
      }
      passed += 1;
      log(`ok   ${label} (${Date.now() - started} ms)`);
    } catch (error) {
      failed += 1;
      log(`FAIL ${label}\n     ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    }
  }
  return { passed, failed, skipped };
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
