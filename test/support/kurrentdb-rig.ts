// Per-test in-memory KurrentDB servers (and whatever else a test opens), closed after each test
// in reverse order. Call at a test file's top level: it registers the `afterEach`.
import { afterEach } from 'vitest';
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
