// Where a bench's report goes: bench/results/<date>-<name>.md, and the commit it measured.
import { execSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The short hash of the checkout's HEAD, or `unknown` outside git. */
export function gitCommit(): string {
  try {
    return execSync('git rev-parse --short HEAD', { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/** Writes `report` to bench/results/<date>-<name>.md; gives the path relative to the repository. */
export function writeResult(name: string, report: string, now: Date = new Date()): string {
  const dir = path.join(REPO_ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${now.toISOString().slice(0, 10)}-${name}.md`);
  writeFileSync(file, report);
  return path.relative(REPO_ROOT, file);
}
