import { EventAssemblerError } from '../errors.js';

export type ConfigErrorDetails = { readonly field: string; readonly problem: string; readonly fix: string };

function line(p: ConfigErrorDetails): string {
  return `${p.field}: ${p.problem}${p.fix ? ` — fix: ${p.fix}` : ''}`;
}

/**
 * The configuration is invalid. `problems` lists every problem found (one line each in the
 * message); `field` and `details` describe the first, so a caller that acts on one field still can.
 */
export class ConfigError extends EventAssemblerError {
  declare readonly code: 'CONFIG_INVALID';
  declare readonly details: ConfigErrorDetails;
  readonly field: string;
  /** Every problem, the first one (`details`) included, in the order found. */
  readonly problems: readonly ConfigErrorDetails[];

  /** One problem (`field`, `problem`, `fix`), then any `more` found in the same configuration. */
  constructor(field: string, problem: string, fix: string, more: readonly ConfigErrorDetails[] = []) {
    const first: ConfigErrorDetails = { field, problem, fix };
    const problems = [first, ...more];
    const message =
      problems.length === 1
        ? `invalid configuration: ${line(first)}`
        : `invalid configuration: ${problems.length} problems:\n${problems.map((p) => `  - ${line(p)}`).join('\n')}`;
    super('CONFIG_INVALID', message, first);
    this.field = field;
    this.problems = Object.freeze(problems);
  }

  /** The error for `problems` (at least one). */
  static of(problems: readonly ConfigErrorDetails[]): ConfigError {
    const [first, ...more] = problems;
    if (!first) throw new TypeError('ConfigError.of: no problem given');
    return new ConfigError(first.field, first.problem, first.fix, more);
  }
}
