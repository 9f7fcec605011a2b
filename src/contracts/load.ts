// Thin I/O shell: reads contract files from a directory. The logic lives in registry.ts / check.ts.
import { readdir, readFile } from 'node:fs/promises';
import { join, posix, sep } from 'node:path';
import { ContractError } from './errors.js';
import type { ContractDocument } from './document.js';
import type { ContractFile } from './check.js';
import { createContractRegistry, type ContractRegistry } from './registry.js';

/** The default contracts directory, relative to the working directory. */
export const DEFAULT_CONTRACTS_DIR = 'contracts';

/**
 * Every `*.json` file under `dir` (recursively), sorted by path; paths are relative to `dir`,
 * with `/`. Messages name files under `options.displayDir` (default: `dir`).
 */
export async function readContractFiles(dir: string, options: { displayDir?: string } = {}): Promise<ContractFile[]> {
  const shown = options.displayDir ?? dir;
  let entries: string[];
  try {
    entries = await readdir(dir, { recursive: true });
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such directory' : (error as Error).message;
    throw new ContractError('CONTRACTS_IO_FAILED', `cannot read the contracts directory ${shown}: ${reason}`, { dir: shown }, { cause: error });
  }
  const names = entries
    .map((entry) => entry.split(sep).join('/'))
    .filter((entry) => entry.endsWith('.json'))
    .sort();
  const files: ContractFile[] = [];
  for (const path of names) {
    try {
      files.push({ path, text: await readFile(join(dir, path), 'utf8') });
    } catch (error) {
      // A directory named `*.json` is no contract; anything else unreadable is an I/O failure.
      if ((error as NodeJS.ErrnoException).code === 'EISDIR') continue;
      throw new ContractError('CONTRACTS_IO_FAILED', `cannot read ${displayPath(shown, path)}: ${(error as Error).message}`, { dir: shown, path }, { cause: error });
    }
  }
  return files;
}

/** How a file is named in messages: the directory as the user gave it, joined with `/`. */
export function displayPath(dir: string, path: string): string {
  return posix.join(dir.split(sep).join('/'), path);
}

/**
 * Reads and parses the `*.schema.json` files under `dir` into documents; each `source` is the
 * file's path under `options.displayDir` (default: `dir` itself), for messages.
 */
export async function loadContractDocuments(dir: string, options: { displayDir?: string } = {}): Promise<ContractDocument[]> {
  const files = (await readContractFiles(dir, options)).filter((file) => file.path.endsWith('.schema.json'));
  return files.map((file) => {
    const source = displayPath(options.displayDir ?? dir, file.path);
    try {
      return { source, schema: JSON.parse(file.text) as unknown };
    } catch (error) {
      throw new ContractError('CONTRACTS_IO_FAILED', `${source}: not valid JSON: ${(error as Error).message}`, { source }, { cause: error });
    }
  });
}

/** Loads the contracts under `dir` (default `contracts`) into a registry. */
export async function loadContractRegistry(dir: string = DEFAULT_CONTRACTS_DIR): Promise<ContractRegistry> {
  return createContractRegistry(await loadContractDocuments(dir));
}
