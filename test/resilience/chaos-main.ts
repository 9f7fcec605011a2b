// `npm run chaos`: the chaos run (chaos-run.ts) outside vitest, at CHAOS_SCALE (default 10 — the
// large run of docs/reliability.md) and CHAOS_SEED (default: time-based, printed). Exit code 0
// when the destination equals what the source history implies, 1 otherwise.
import { runChaos } from './chaos-run.js';

const scale = Number(process.env.CHAOS_SCALE ?? 10);
const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 2_147_483_647);

try {
  const result = await runChaos({ scale, seed });
  const { removed, duplicated, swapped } = result.selfCheck;
  console.log(
    `comparison on doctored copies: one removed → missing ${removed.missing.length}; one duplicated → duplicated ${duplicated.duplicated.length}; two swapped → out of order ${swapped.outOfOrder.length} streams`,
  );
  process.exit(0);
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
