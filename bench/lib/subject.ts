/**
 * What the benchmark measures: the production build — plain `tsc` output of `tsconfig.build.json`,
 * what `bin/event-assembler.js` runs from `dist/` once the package is built. `npm run bench` builds
 * it into `.tmp/bench-build/` first (not `dist/`: a stale `dist/` would be what the CLI runs in a
 * checkout, tests included). With
 * `EA_BENCH_FROM=src` it measures the TypeScript sources through tsx instead, as `npm start` runs
 * them; tsx compiles with esbuild's keepNames, which wraps every function it creates, and costs
 * about a quarter more CPU per transaction (measured: null sink 229 vs 175 µs CPU/transaction).
 * The mappers (examples/invoicing) are user code loaded through tsx either way (the CLI compiles a
 * configuration's TypeScript with esbuild, without keepNames, since 2026-12-06: src/config/compile-module.ts).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type * as BufferModule from '../../src/buffer/index.js';
import type * as ConsumerModule from '../../src/consumer/index.js';
import type * as ContractsModule from '../../src/contracts/index.js';
import type * as MappingModule from '../../src/mapping/index.js';
import type * as PipelineModule from '../../src/pipeline/index.js';
import type * as PositionModule from '../../src/source/position.js';
import type * as ReconcileModule from '../../src/reconcile/index.js';
import type * as ReplicationModule from '../../src/source/replication.js';
import type * as SinkModule from '../../src/sink/index.js';
import type * as SourceModule from '../../src/source/index.js';
import type * as KurrentModule from '../../src/testing/kurrentdb/index.js';
import type * as MapperKitModule from '../../src/testing/mapper-kit.js';

export const FROM = process.env.EA_BENCH_FROM === 'src' ? 'src' : 'build';
const ext = FROM === 'src' ? 'ts' : 'js';
// EA_BENCH_BUILD_DIR (relative to the repository root): another build, e.g. a baseline to compare against.
const root = new URL(FROM === 'src' ? '../../src/' : `../../${process.env.EA_BENCH_BUILD_DIR ?? '.tmp/bench-build'}/`, import.meta.url);
if (FROM === 'build' && !existsSync(new URL('pipeline/index.js', root))) {
  throw new Error(`bench: no build in ${fileURLToPath(root)} — run "npx tsc -p tsconfig.build.json --outDir .tmp/bench-build" first (npm run bench does), or set EA_BENCH_FROM=src`);
}

async function load<T>(path: string): Promise<T> {
  return (await import(new URL(`${path}.${ext}`, root).href)) as T;
}

export const { createAssembler, silentLogger } = await load<typeof PipelineModule>('pipeline/index');
export const { compareLsn, formatLsn, encodeCheckpoint } = await load<typeof PositionModule>('source/position');
export const { standbyStatusUpdate } = await load<typeof ReplicationModule>('source/replication');
export const { createPostgresSource } = await load<typeof SourceModule>('source/index');
export const { withChanges } = await load<typeof BufferModule>('buffer/index');
export const { mapUnit, defineMapper } = await load<typeof MappingModule>('mapping/index');
export const { loadContractRegistry } = await load<typeof ContractsModule>('contracts/index');
export const { startInMemoryKurrentDB } = await load<typeof KurrentModule>('testing/kurrentdb/index');
export const { createKurrentDBSink } = await load<typeof SinkModule>('sink/index');
export const { insert, transaction } = await load<typeof MapperKitModule>('testing/mapper-kit');
export const { reconcile } = await load<typeof ReconcileModule>('reconcile/index');
export const { createProjectionRunner, defineProjection } = await load<typeof ConsumerModule>('consumer/index');
