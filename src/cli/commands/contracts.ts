// `event-assembler contracts check|gen`: the CI gate over the JSON Schema contracts and the
// TypeScript types generated from them. Thin shell: reading files and git here, rules in
// src/contracts/check.ts and src/contracts/codegen.ts.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { Command, CommanderError } from 'commander';
import { checkContracts, formatFinding, type ContractFile } from '../../contracts/check.js';
import { ContractError } from '../../contracts/errors.js';
import { readContractFilesAtRef } from '../../contracts/git.js';
import { DEFAULT_CONTRACTS_DIR, loadContractDocuments, readContractFiles } from '../../contracts/load.js';
import { createContractRegistry } from '../../contracts/registry.js';
import { EventAssemblerError } from '../../errors.js';

/** Exit codes of the contracts commands, for CI. */
export const EXIT_OK = 0;
export const EXIT_VIOLATIONS = 1;
export const EXIT_USAGE_OR_IO = 2;

/** Where the commands write, and the directory relative paths are taken from (default: the process's). */
export interface ContractsIo {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
  readonly cwd?: string;
}

const consoleIo: ContractsIo = { out: (line) => console.log(line), err: (line) => console.error(line) };

export interface CheckOptions {
  /** Contracts directory. Default `contracts`. */
  readonly dir?: string;
  /** Git ref holding the published versions; `false` skips the immutability rules. Default `HEAD`. */
  readonly against?: string | false;
}

/** `contracts check`; resolves to the exit code (0 ok, 1 violations, 2 usage/IO error). */
export async function runContractsCheck(options: CheckOptions, io: ContractsIo = consoleIo): Promise<number> {
  const dir = options.dir ?? DEFAULT_CONTRACTS_DIR;
  const against = options.against ?? 'HEAD';
  const path = resolve(io.cwd ?? process.cwd(), dir);
  let current: ContractFile[];
  let published: ContractFile[] | undefined;
  let baseline = 'none (--no-against: immutability not checked)';
  try {
    current = await readContractFiles(path, { displayDir: dir });
    if (against !== false) {
      const atRef = await readContractFilesAtRef(path, against);
      published = atRef.files;
      baseline = atRef.commit === undefined ? `${against} (no commits yet: nothing published)` : `${against} (${atRef.commit.slice(0, 12)})`;
    }
  } catch (error) {
    return ioFailure(error, io, 'contracts check');
  }

  const report = checkContracts({ current, published, dir });
  for (const violation of report.violations) io.out(formatFinding(violation));
  if (report.newVersions.length > 0) {
    io.out(published === undefined ? 'contracts (all treated as new without a baseline):' : `new since ${against}:`);
    for (const entry of report.newVersions) {
      const what = {
        initial: 'a new event type (v1)',
        breaking: `BREAKING relative to v${Number(entry.key.split('@')[1]) - 1} (fine: that is why it is a new version; consumers need an upcaster or a migration)`,
        additive: `additive relative to v${Number(entry.key.split('@')[1]) - 1} (readers of the previous version keep working)`,
        unchanged: `identical in shape to v${Number(entry.key.split('@')[1]) - 1} (only documentation differs; is a new version needed?)`,
      }[entry.classification];
      io.out(`  ${entry.file}: ${entry.key} is ${what}`);
      for (const change of entry.changes) io.out(`    ${change.breaking ? 'breaking' : 'additive'}: ${change.message}`);
    }
  }
  const count = report.violations.length;
  io.out(`contracts check: ${report.contracts} contract(s) in ${dir}, ${count} violation(s); baseline ${baseline}`);
  return count > 0 ? EXIT_VIOLATIONS : EXIT_OK;
}

export interface GenOptions {
  /** Contracts directory. Default `contracts`. */
  readonly dir?: string;
  /** Output file; default: standard output. */
  readonly out?: string;
  /** Do not write: exit 1 when `out` differs from what would be generated. */
  readonly check?: boolean;
}

/** The command line recorded in the generated file's header. */
export function genCommand(options: GenOptions): string {
  const dir = options.dir ?? DEFAULT_CONTRACTS_DIR;
  return `event-assembler contracts gen --dir ${dir}${options.out ? ` --out ${options.out}` : ''}`;
}

/** `contracts gen`; resolves to the exit code (0 ok, 1 invalid contracts or stale --check, 2 usage/IO error). */
export async function runContractsGen(options: GenOptions, io: ContractsIo = consoleIo): Promise<number> {
  const dir = options.dir ?? DEFAULT_CONTRACTS_DIR;
  const cwd = io.cwd ?? process.cwd();
  if (options.check && !options.out) {
    io.err('contracts gen: --check needs --out <file> (the file to compare with)');
    return EXIT_USAGE_OR_IO;
  }
  let source: string;
  try {
    const registry = createContractRegistry(await loadContractDocuments(resolve(cwd, dir), { displayDir: dir }));
    if (registry.list().length === 0) {
      io.err(`contracts gen: no contracts (*.schema.json) under ${dir}`);
      return EXIT_USAGE_OR_IO;
    }
    // Loaded on demand: json-schema-to-typescript brings prettier, which other commands do not need.
    const { generateContractTypes } = await import('../../contracts/codegen.js');
    source = await generateContractTypes(registry.list(), { command: genCommand(options) });
  } catch (error) {
    if (error instanceof ContractError && error.code !== 'CONTRACTS_IO_FAILED') {
      io.err(`contracts gen: ${error.message}\n(run "event-assembler contracts check --dir ${dir}" for every problem at once)`);
      return EXIT_VIOLATIONS;
    }
    return ioFailure(error, io, 'contracts gen');
  }
  if (!options.out) {
    io.out(source.replace(/\n$/, ''));
    return EXIT_OK;
  }
  const outPath = resolve(cwd, options.out);
  try {
    if (options.check) {
      const existing = await readFile(outPath, 'utf8').catch(() => undefined);
      if (existing === source) {
        io.out(`${options.out} is up to date`);
        return EXIT_OK;
      }
      io.out(`${options.out} is out of date: run ${genCommand({ ...options, check: false })}`);
      return EXIT_VIOLATIONS;
    }
    await mkdir(dirname(outPath), { recursive: true });
    await writeFile(outPath, source);
  } catch (error) {
    return ioFailure(error, io, 'contracts gen');
  }
  io.out(`wrote ${options.out}`);
  return EXIT_OK;
}

function ioFailure(error: unknown, io: ContractsIo, command: string): number {
  const message = error instanceof EventAssemblerError ? `[${error.code}] ${error.message}` : error instanceof Error ? error.message : String(error);
  io.err(`${command}: ${message}`);
  return EXIT_USAGE_OR_IO;
}

const GROUP_HELP = `
Contracts are JSON Schema (2020-12) files, one per event type and version:
  <dir>/<domain>/<Type>.v<N>.schema.json   e.g. contracts/invoicing/InvoiceIssued.v2.schema.json
each declaring "$schema" (2020-12), a unique "$id", "title", "x-event-type" and
"x-event-version" (both must agree with the file name) and a root "type": "object".

Exit codes: 0 ok, 1 violations (or stale/invalid contracts for gen), 2 usage or I/O error.
`;

const CHECK_HELP = `
What "immutable" means:
  A version that exists at the baseline ref (--against, default HEAD) is PUBLISHED: events
  of that version may already be stored in KurrentDB and consumers rely on its shape. Such a
  file may change only in documentation — title, description, examples, $comment, deprecated.
  Any other edit is a violation, even an additive one: publish it as version N+1 instead
  (add <Type>.v<N+1>.schema.json, plus an upcaster when the change is breaking).
  Deleting or renaming a published file is a violation too.

  Because published files cannot change, a breaking change without a version bump cannot
  get through: the only way to change a shape is a new version, and the check reports
  whether that new version is additive or breaking relative to the previous one.

Also checked: file names (<Type>.v<N>.schema.json), JSON syntax, the contract envelope,
that every schema compiles (ajv, strict mode, formats), unique type@version and "$id",
and contiguous versions from v1.

Baseline: with the default --against HEAD, working-tree edits of committed versions are
caught (a pre-commit check). In CI on a branch, compare with what is published on the
main line, e.g. --against origin/main (or $(git merge-base origin/main HEAD)).

Output: one line per violation, "<file>: <message>", then the new versions (informational),
then a summary line.

Exit codes: 0 no violations; 1 violations; 2 usage or I/O error (missing directory, not
a git repository, unknown ref).

Examples:
  $ event-assembler contracts check
  $ event-assembler contracts check --against origin/main
  $ event-assembler contracts check --dir contracts --no-against   # outside a git checkout
`;

const GEN_HELP = `
Writes one TypeScript module: a data type per contract named <Type>V<N> (InvoiceIssuedV2),
"interface EventContracts" keyed 'Type@N' (used to type-check mapper output) and
"type LatestEventContracts" keyed by type (the latest version's data type).
The output is deterministic (sorted, no timestamps) and starts with a "generated — do not
edit" header naming the command; commit it and regenerate after changing contracts.

Exit codes: 0 written (or up to date with --check); 1 invalid contracts or, with --check,
the file is out of date; 2 usage or I/O error.

Examples:
  $ event-assembler contracts gen --dir contracts/invoicing --out examples/invoicing/contracts.generated.ts
  $ event-assembler contracts gen --dir contracts/invoicing --out examples/invoicing/contracts.generated.ts --check
  $ event-assembler contracts gen > src/contracts.generated.ts
`;

/** Usage errors (unknown option, missing argument) exit with 2, not commander's default 1. */
function usageExitCode(error: CommanderError): never {
  process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE_OR_IO);
}

export function register(program: Command): void {
  const contracts = program
    .command('contracts')
    .summary('check and generate types from the JSON Schema event contracts')
    .description('Work with the JSON Schema contracts that define the data of every business event and version.')
    .addHelpText('after', GROUP_HELP)
    .exitOverride(usageExitCode);

  contracts
    .command('check')
    .summary('CI gate: published versions are immutable; files parse, compile and are consistent')
    .description('Checks the contracts directory; compared with a git ref, any semantic edit of a published version is a violation.')
    .option('--dir <dir>', 'contracts directory', DEFAULT_CONTRACTS_DIR)
    .option('--against <ref>', 'git ref whose contract files count as published', 'HEAD')
    .option('--no-against', 'skip the immutability rules (no git baseline)')
    .addHelpText('after', CHECK_HELP)
    .exitOverride(usageExitCode)
    .action(async (flags: { dir: string; against: string | false }) => {
      process.exitCode = await runContractsCheck({ dir: flags.dir, against: flags.against });
    });

  contracts
    .command('gen')
    .summary('generate TypeScript types (<Type>V<N>, EventContracts, LatestEventContracts)')
    .description('Generates one TypeScript module from the contracts with json-schema-to-typescript.')
    .option('--dir <dir>', 'contracts directory', DEFAULT_CONTRACTS_DIR)
    .option('--out <file>', 'output file (default: standard output)')
    .option('--check', 'do not write; exit 1 if --out is not what gen would write')
    .addHelpText('after', GEN_HELP)
    .exitOverride(usageExitCode)
    .action(async (flags: { dir: string; out?: string; check?: boolean }) => {
      process.exitCode = await runContractsGen({ dir: flags.dir, out: flags.out, check: flags.check === true });
    });
}
