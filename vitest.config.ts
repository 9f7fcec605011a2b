import { defineConfig } from 'vitest/config';
import HeavyFirstSequencer from './test/heavy-first.js';

/** What both projects share; global setup is the root's alone (a project's would run again). */
const shared = {
  testTimeout: 60_000,
  hookTimeout: 120_000,
  // 2-core machines: files run in forks, at most two at a time.
  pool: 'forks',
} as const;

export default defineConfig({
  test: {
    // One embedded PostgreSQL per run; test files ask for it through inject('postgres').
    globalSetup: ['test/global-setup.ts'],
    maxWorkers: 2,
    sequence: { sequencer: HeavyFirstSequencer },
    projects: [
      // Unit files share a worker's module cache (no fresh import of src per file): 76 files took
      // 60 s isolated and 34 s so (104 → 58 CPU-s), where importing dominated.
      { test: { ...shared, name: 'unit', include: ['test/unit/**/*.test.ts', 'src/**/*.test.ts'], isolate: false } },
      { test: { ...shared, name: 'integration', include: ['test/integration/**/*.test.ts', 'test/resilience/**/*.test.ts', 'test/conformance/**/*.test.ts'] } },
    ],
  },
});
