// Per-test in-memory KurrentDB servers (and whatever else a test opens), closed after each test
// in reverse order. Call at a test file's top level: it registers the `afterEach`.
import { afterEach } from 'vitest';
import { createKurrentDBSink, type KurrentDBSink, type KurrentDBSinkOptions } from '../../src/sink/index.js';
import { startInMemoryKurrentDB, type InMemoryKurrentDB, type InMemoryKurrentDBOptions } from '../../src/testing/kurrentdb/index.js';

/** A line a sink logged, as the sink tests capture them. */
export interface LogLine {
  level: 'info' | 'warn';
  message: string;
  fields: Record<string, unknown> | undefined;
}

export function useInMemoryKurrentDB(): {
  readonly cleanups: Array<() => Promise<void>>;
  server(options?: InMemoryKurrentDBOptions): Promise<InMemoryKurrentDB>;
} {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return {
    cleanups,
    async server(options = {}) {
      const db = await startInMemoryKurrentDB(options);
      cleanups.push(() => db.close());
      return db;
    },
  };
}

/**
 * A sink on `db` for a test (closed with the test's cleanups): quick retries, its log lines
 * collected in `logs`; `defaults` apply to every sink of the factory, `options` to this one.
 */
export function sinkFactory(cleanups: Array<() => Promise<void>>, defaults: Partial<KurrentDBSinkOptions> = {}) {
  return async function sink(db: InMemoryKurrentDB, options: Partial<KurrentDBSinkOptions> & { assembler: string }, logs: LogLine[] = []): Promise<KurrentDBSink> {
    const created = await createKurrentDBSink({
      connectionString: db.connectionString,
      retry: { initialDelayMs: 5, maxDelayMs: 50 },
      logger: {
        info: (message, fields) => logs.push({ level: 'info', message, fields }),
        warn: (message, fields) => logs.push({ level: 'warn', message, fields }),
      },
      ...defaults,
      ...options,
    });
    cleanups.push(() => created.close());
    return created;
  };
}

/** Sink hooks that simulate a crash: the `n`-th append request (1-based) throws before it is sent. */
export function crashAtAppend(n: number): { beforeAppend(): void } {
  let sent = 0;
  return {
    beforeAppend() {
      sent += 1;
      if (sent === n) throw new Error('simulated crash');
    },
  };
}

/** A stream's events as stored (data and metadata parsed), without gRPC. */
export function stored(db: InMemoryKurrentDB, stream: string) {
  return db.readStreamEvents(stream).map((event) => ({
    id: event.id,
    type: event.type,
    revision: event.revision,
    data: JSON.parse(Buffer.from(event.data).toString('utf8')) as unknown,
    metadata: JSON.parse(Buffer.from(event.metadata).toString('utf8')) as Record<string, string>,
  }));
}
