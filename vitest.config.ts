import { defineConfig } from 'vitest/config';
import HeavyFirstSequencer from './test/heavy-first.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    // One embedded PostgreSQL per run; test files ask for it through inject('postgres').
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // 2-core machines: files run in forks, at most two at a time.
    pool: 'forks',
    maxWorkers: 2,
    sequence: { sequencer: HeavyFirstSequencer },
  },
});
