// Thin I/O shell: reads the contract files of a directory as they are at a git ref
// (`git ls-tree` + `git show <ref>:<path>`), for the immutability check in check.ts.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ContractError } from './errors.js';
import type { ContractFile } from './check.js';

const run = promisify(execFile);

async function git(cwd: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await run('git', args, { cwd, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? '').trim();
    throw new ContractError('CONTRACTS_GIT_FAILED', `git ${args.join(' ')} failed${stderr ? `: ${stderr}` : ''}`, { cwd, args }, { cause: error });
  }
}

/** The contract files (`*.json`) under `dir` at `ref`, or `undefined` when `ref` is `HEAD` of a repository without commits. */
export async function readContractFilesAtRef(dir: string, ref: string): Promise<{ commit: string; files: ContractFile[] } | { commit: undefined; files: [] }> {
  const top = (await git(dir, ['rev-parse', '--show-toplevel'])).trim();
  const prefix = (await git(dir, ['rev-parse', '--show-prefix'])).trim();
  let commit: string;
  try {
    commit = (await git(dir, ['rev-parse', '--verify', '--end-of-options', `${ref}^{commit}`])).trim();
  } catch (error) {
    if (ref === 'HEAD') {
      // An unborn HEAD (no commit yet) has published nothing.
      const hasCommits = await git(dir, ['rev-list', '-n', '1', '--all']).then((out) => out.trim() !== '');
      if (!hasCommits) return { commit: undefined, files: [] };
    }
    throw new ContractError('CONTRACTS_GIT_FAILED', `unknown git ref "${ref}" (${(error as Error).message})`, { ref }, { cause: error });
  }
  const listing = await git(top, ['ls-tree', '-r', '-z', '--name-only', '--full-tree', commit, '--', prefix === '' ? '.' : prefix]);
  const names = listing
    .split('\0')
    .filter((name) => name.endsWith('.json') && name.startsWith(prefix))
    .sort();
  const files: ContractFile[] = [];
  for (const name of names) {
    files.push({ path: name.slice(prefix.length), text: await git(top, ['show', `${commit}:${name}`]) });
  }
  return { commit, files };
}
