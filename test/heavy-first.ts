// The test files' order: the two longest first (pipeline-bulk ~4–5 min, the crash test ~3 min on
// 2 cores), then vitest's own order. With two workers, a long file that starts late becomes the
// run's tail alone: in a fresh clone (no duration cache) pipeline-bulk started ~3 min in and the
// run took 735 s; started first, the others fit beside it.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const HEAVY = ['test/integration/pipeline-bulk.test.ts', 'test/resilience/crash.test.ts'];

export default class HeavyFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification): number => {
      const i = HEAVY.findIndex((heavy) => file.moduleId.endsWith(heavy));
      return i === -1 ? HEAVY.length : i;
    };
    return [...sorted].sort((a, b) => rank(a) - rank(b));
  }
}
