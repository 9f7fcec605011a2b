import { describe, expect, it } from 'vitest';
import { checkMapperPurity, defineMapper, MapperPurityError } from '../../src/mapping/index.js';
import { insert, transaction } from '../../src/testing/mapper-kit.js';

const unit = transaction([insert('public.invoice', { id: 'inv_1', status: 'draft' })]);
const tables = { 'public.invoice': { columns: ['id', 'status'] } } as const;

function purityError(fn: () => unknown): MapperPurityError {
  try {
    fn();
  } catch (error) {
    if (error instanceof MapperPurityError) return error;
    throw error;
  }
  throw new Error('expected a MapperPurityError');
}

describe('checkMapperPurity', () => {
  it('passes a pure mapper and returns its output', () => {
    const pure = defineMapper({
      name: 'pure',
      tables,
      map: (tx) => tx.rows('public.invoice').map((r) => ({ stream: `invoice-${String(r.id)}`, type: 'A', version: 1, data: { at: tx.commitTime } })),
    });
    expect(checkMapperPurity(pure, unit)).toEqual([{ stream: 'invoice-inv_1', type: 'A', version: 1, data: { at: '2026-01-15T10:00:00.000000Z' } }]);
  });

  it('catches a mapper that reads the clock, naming the path', () => {
    let tick = 0;
    const clock = defineMapper({
      name: 'clock',
      tables,
      // A fake clock that always moves on, standing in for Date.now()/new Date().
      map: () => [{ stream: 'invoice-inv_1', type: 'A', version: 1, data: { at: new Date(Date.UTC(2026, 0, 1) + ++tick).toISOString() } }],
    });
    const error = purityError(() => checkMapperPurity(clock, unit));
    expect(error.code).toBe('MAPPER_IMPURE');
    expect(error.details.path).toBe('[0].data.at');
    expect(error.message).toContain('mapper "clock" is not pure');
    expect(error.message).toContain('[0].data.at');
    expect(error.message).toContain('tx.commitTime');
  });

  it('catches Math.random', () => {
    const random = defineMapper({ name: 'random', tables, map: () => [{ stream: 'invoice-1', type: 'A', version: 1, data: { nonce: Math.random() } }] });
    expect(purityError(() => checkMapperPurity(random, unit)).details.path).toBe('[0].data.nonce');
  });

  it('catches state kept between calls', () => {
    const seen = new Set<string>();
    const stateful = defineMapper({
      name: 'stateful',
      tables,
      map: (tx) =>
        tx.rows('public.invoice').flatMap((r) => {
          const first = !seen.has(String(r.id));
          seen.add(String(r.id));
          return first ? [{ stream: `invoice-${String(r.id)}`, type: 'A', version: 1, data: {} }] : [];
        }),
    });
    expect(purityError(() => checkMapperPurity(stateful, unit)).details.path).toBe('length');
  });

  it('catches a mapper that mutates its input (the view is deep-frozen)', () => {
    const mutating = defineMapper({
      name: 'mutating',
      tables,
      map: (tx) => {
        (tx.rows('public.invoice')[0] as Record<string, unknown>).status = 'issued';
        return [];
      },
    });
    expect(() => checkMapperPurity(mutating, unit)).toThrow(TypeError);
  });

  it("rethrows the mapper's own error when both runs fail alike", () => {
    const broken = defineMapper({
      name: 'broken',
      tables,
      map: () => {
        throw new Error('always');
      },
    });
    expect(() => checkMapperPurity(broken, unit)).toThrow('always');
  });
});
