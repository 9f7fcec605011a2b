// The `project` configuration's `rebuild` section: per projection, the validation `project rebuild`
// runs before switching readers. Every problem is reported at once, with its field and a fix.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/index.js';
import { defineProjection, parseProjectionConfig, type ProjectionConfig, type RebuildValidation } from '../../src/consumer/index.js';

const accounts = defineProjection<{ Deposited: { account: string } }>({ name: 'accounts', from: { categories: ['account'] }, handlers: { Deposited: () => undefined } });
const base = { postgres: 'postgresql://app@localhost/app', kurrentdb: 'kurrentdb://localhost:2113?tls=false', projections: [accounts] };
const source: RebuildValidation['source'] = () => null;
const check: RebuildValidation['check'] = () => undefined;

function problemsOf(config: unknown): { field: string; problem: string; fix: string }[] {
  try {
    parseProjectionConfig(config as ProjectionConfig);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  throw new Error('the configuration was accepted');
}

describe('projection config: rebuild', () => {
  it('is {} when left out, and the entries as given otherwise (functions kept)', () => {
    expect(parseProjectionConfig(base).rebuild).toEqual({});
    const validate = { table: 'accounts', key: 'id', entityType: 'account', sample: 5, source, check };
    const resolved = parseProjectionConfig({ ...base, rebuild: { accounts: { validate } } });
    expect(resolved.rebuild['accounts']!.validate).toEqual(validate);
    expect(resolved.rebuild['accounts']!.validate!.check).toBe(check);
    expect(parseProjectionConfig({ ...base, rebuild: { accounts: {} } }).rebuild).toEqual({ accounts: {} });
  });

  it('an entry naming no configured projection is an error naming the field and the projections there are', () => {
    const [problem, ...more] = problemsOf({ ...base, rebuild: { acounts: { validate: { table: 'accounts' } } } });
    expect(more).toEqual([]);
    expect(problem).toEqual({
      field: 'rebuild.acounts',
      problem: 'names no projection of projections (accounts)',
      fix: 'use the name of a projection listed in projections, or remove rebuild.acounts',
    });
  });

  it('reports every problem of validate at once, each with its field and fix', () => {
    const problems = problemsOf({
      ...base,
      rebuild: {
        accounts: { validate: { key: '', sample: 0, check: 'no', smaple: 3 } },
        ghost: { validate: { table: 'x', sample: 2 } },
      },
    });
    const byField = Object.fromEntries(problems.map((p) => [p.field, p]));
    expect(Object.keys(byField).sort()).toEqual([
      'rebuild.accounts.validate.check',
      'rebuild.accounts.validate.key',
      'rebuild.accounts.validate.sample',
      'rebuild.accounts.validate.smaple',
      'rebuild.accounts.validate.table',
      'rebuild.ghost',
      'rebuild.ghost.validate.check',
    ]);
    expect(byField['rebuild.accounts.validate.table']!.problem).toBe('is required');
    expect(byField['rebuild.accounts.validate.table']!.fix).toContain("table: 'accounts'");
    expect(byField['rebuild.accounts.validate.sample']!.problem).toBe('must be at least 1');
    expect(byField['rebuild.accounts.validate.check']!.problem).toBe('must be a function');
    expect(byField['rebuild.accounts.validate.smaple']!.problem).toBe('unknown field(s) "smaple"');
    expect(byField['rebuild.ghost.validate.check']).toEqual({
      field: 'rebuild.ghost.validate.check',
      problem: 'is needed to compare the sampled rows',
      fix: 'give check: (row, source, entity) => what differs (a string) or nothing, together with source',
    });
    for (const p of problems) expect(p.fix).not.toMatch(/^see the field/);
  });

  it('source and check go together', () => {
    expect(problemsOf({ ...base, rebuild: { accounts: { validate: { table: 'accounts', check } } } })).toEqual([
      expect.objectContaining({ field: 'rebuild.accounts.validate.source', problem: 'and the other of source/check go together: the check compares a row with its source row' }),
    ]);
    expect(problemsOf({ ...base, rebuild: { accounts: { validate: { table: 'accounts', source } } } }).map((p) => p.field)).toEqual(['rebuild.accounts.validate.check']);
  });

  it('rebuild itself must be an object of entries', () => {
    expect(problemsOf({ ...base, rebuild: [] }).map((p) => p.field)).toEqual(['rebuild']);
    expect(problemsOf({ ...base, rebuild: { accounts: { validate: { table: 'accounts' }, to: 'head' } } })).toEqual([
      expect.objectContaining({ field: 'rebuild.accounts.to', problem: 'unknown field(s) "to"' }),
    ]);
  });
});
