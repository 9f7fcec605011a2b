#!/usr/bin/env node
// Runs the CLI from TypeScript sources through tsx when no build exists, from dist otherwise.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const built = join(root, 'dist', 'cli', 'main.js');
if (existsSync(built)) {
  const { buildProgram } = await import(pathToFileURL(built).href);
  await buildProgram().parseAsync(process.argv);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  const { buildProgram } = await import(pathToFileURL(join(root, 'src', 'cli', 'main.ts')).href);
  await buildProgram().parseAsync(process.argv);
}
