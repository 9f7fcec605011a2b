// Mapper pitfalls caught before the sink: a stream name with `undefined`/`null`/`NaN` interpolated
// into it, data JSON cannot carry (bigint, Date, undefined array elements, NaN, functions, …).
// The MapperOutputError names the mapper, the event and the field, with a fix, and follows the
// mapper's onError on every path: mapUnit (transactions, snapshot records), planLargeUnit, the kit.
import { AssertionError } from 'node:assert';
import { describe, expect, it } from 'vitest';
import {
  checkMappedEvents,
  defineMapper,
  MapperError,
  MapperOutputError,
  mapUnit,
  planLargeUnit,
  type AnyMapper,
  type FailureDiagnosis,
  type LargeUnitPlan,
  type MappedEvent,
  type OnError,
} from '../../src/mapping/index.js';
import { MapperOutputError as RootMapperOutputError } from '../../src/index.js';
import { del, insert, mapperSpec, snapshotRecord, transaction } from '../../src/testing/mapper-kit.js';
import type { SourceTransaction } from '../../src/source/types.js';

const context = { assembler: 'shop', sourceIdentity: '7000000000000000001' };
const unit = transaction([insert('public.orders', { id: 'o1', status: 'new' })], { commitLsn: '0/16B3748', xid: 744 });

/** A mapper returning `events` for any change of public.orders. */
function emitting(events: readonly unknown[], onError: OnError = 'halt', name = 'orders'): AnyMapper {
  return defineMapper({ name, onError, tables: { 'public.orders': { columns: ['id', 'status'] } }, map: () => events as MappedEvent[] });
}

const ok = (over: Record<string, unknown> = {}): Record<string, unknown> => ({ stream: 'order-o1', type: 'OrderPlaced', version: 1, data: { orderId: 'o1' }, ...over });

/** The MapperOutputError a halting mapper's output gives, via mapUnit. */
function outputErrorOf(events: readonly unknown[]): MapperOutputError {
  try {
    mapUnit([emitting(events)], unit, context);
  } catch (error) {
    expect(error).toBeInstanceOf(MapperError);
    const cause = (error as MapperError).cause;
    expect(cause).toBeInstanceOf(MapperOutputError);
    return cause as MapperOutputError;
  }
  throw new Error('expected a MapperError');
}

function drain(run: Generator<void, LargeUnitPlan>): LargeUnitPlan {
  for (;;) {
    const next = run.next();
    if (next.done) return next.value;
  }
}

describe('MapperOutputError: stream names with an interpolated undefined, null or NaN', () => {
  it('the reported pitfall: a delete read from change.before (declared before-columns only) goes to order-undefined — refused, with the fix', () => {
    const cancellations = defineMapper({
      name: 'cancellations',
      tables: { 'public.orders': { columns: ['id', 'status'], before: ['status'] } },
      map: (tx) => tx.deletes('public.orders').map((change) => ({ stream: `order-${String(change.before?.id)}`, type: 'OrderCancelled', version: 1, data: {} })),
    });
    const deletes = transaction([del('public.orders', { id: 'o1', status: 'new' }, { replicaIdentity: 'full' }), del('public.orders', { id: 'o2', status: 'new' }, { replicaIdentity: 'full' })]);
    const error = (() => {
      try {
        mapUnit([cancellations], deletes, context);
      } catch (e) {
        return e as MapperError;
      }
      throw new Error('expected a MapperError');
    })();
    expect(error).toBeInstanceOf(MapperError);
    expect(error.message).toContain('mapper "cancellations": events[0].stream "order-undefined" holds "undefined"');
    expect(error.message).toContain('read the key from change.key');
    expect((error.cause as MapperOutputError).details).toEqual({
      mapper: 'cancellations',
      event: { index: 0, type: 'OrderCancelled', stream: 'order-undefined' },
      path: 'stream',
      problem: '"order-undefined" holds "undefined": a value interpolated into it was undefined',
      hint: expect.stringContaining('change.key'),
    });
    // The fix: the key.
    const fixed = defineMapper({ ...cancellations, map: (tx) => tx.deletes('public.orders').map((change) => ({ stream: `order-${String(change.key.id)}`, type: 'OrderCancelled', version: 1, data: {} })) });
    expect(mapUnit([fixed], deletes, context).events.map((e) => e.stream)).toEqual(['order-o1', 'order-o2']);
  });

  it.each([
    ['order-undefined', 'undefined'],
    ['order-null', 'null'],
    ['line-7-NaN', 'NaN'],
    ['order-null_3', 'null'],
    ['order-x.undefined.y', 'undefined'],
    ['order-undefined:undefined', 'undefined'],
    ['null-o1', 'null'],
    ['order-[object Object]', '[object Object]'],
  ])('refuses %s (a token not touching a letter or digit)', (stream, token) => {
    const error = outputErrorOf([ok(), ok({ stream })]);
    expect(error.details.path).toBe('stream');
    expect(error.details.event).toEqual({ index: 1, type: 'OrderPlaced', stream });
    expect(error.details.problem).toContain(`holds "${token}"`);
  });

  it.each(['order-nullable-x', 'user-annulled', 'tag-NULL', 'order-Null', 'bread-naan', 'customer-NaNa', 'order-undefinedness', 'order-nan', 'order-1null', 'order-nulla_1', 'order-o1'])(
    'accepts %s (the letters inside a word, or a casing interpolation never writes)',
    (stream) => {
      expect(mapUnit([emitting([ok({ stream })])], unit, context).events[0]!.stream).toBe(stream);
    },
  );

  it('checks an explicit entity the same way', () => {
    const error = outputErrorOf([ok({ stream: 'orders', entity: { type: 'order', id: 'null' } })]);
    expect(error.details.path).toBe('entity.id');
    expect(mapUnit([emitting([ok({ stream: 'orders', entity: { type: 'order', id: 'nullable' } })])], unit, context).events[0]!.metadata['entity.id']).toBe('nullable');
  });
});

describe('MapperOutputError: data JSON cannot carry', () => {
  class Money {
    constructor(readonly amount: string) {}
  }
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic['self'] = cyclic;
  const holey = [1, , 3]; // eslint-disable-line no-sparse-arrays
  it.each([
    ['a bigint', { n: 1n }, 'data.n', /is a bigint/, /String\(value\)/],
    ['a Date', { at: new Date(0) }, 'data.at', /is a Date/, /toISOString\(\)/],
    ['an undefined array element', { ids: ['a', undefined] }, 'data.ids[1]', /is undefined \(an array element/, /use null, or filter/],
    ['a hole in an array', { ids: holey }, 'data.ids[1]', /is undefined/, /filter/],
    ['a function', { f: () => 1 }, 'data.f', /is a function/, /not the function/],
    ['a symbol', { s: Symbol('x') }, 'data.s', /is a symbol/, /isUnchangedToast/],
    ['NaN', { total: Number('x') }, 'data.total', /is NaN/, /use null or a string/],
    ['Infinity', { ratio: 1 / 0 }, 'data.ratio', /is Infinity/, /use null or a string/],
    ['-Infinity', { ratio: -1 / 0 }, 'data.ratio', /is -Infinity/, /use null or a string/],
    ['bytes', { raw: Buffer.from('ab') }, 'data.raw', /is bytes/, /base64/],
    ['a Map', { m: new Map([['a', 1]]) }, 'data.m', /is a Map/, /Object\.fromEntries/],
    ['a Set', { s: new Set([1]) }, 'data.s', /is a Set/, /\[\.\.\.value\]/],
    ['a class instance', { price: new Money('1.00') }, 'data.price', /is a Money/, /plain object/],
    ['a cycle', { node: cyclic }, 'data.node.self', /cycle/, /cannot hold a cycle/],
    ['a nested field', { lines: [{ amount: '1' }, { amount: '2' }, { amount: 3n }] }, 'data.lines[2].amount', /is a bigint/, /String/],
    ['a key that is not an identifier', { lines: [{ 'unit price': new Date(0) }] }, 'data.lines[0]["unit price"]', /is a Date/, /toISOString/],
    ['data itself', new Date(0), 'data', /is a Date/, /toISOString/],
  ])('%s: names the path and the fix', (_what, data, path, problem, hint) => {
    const error = outputErrorOf([ok(), ok(), ok({ type: 'OrderTotalled', stream: 'order-o9', data })]);
    expect(error.code).toBe('MAPPER_OUTPUT_INVALID');
    expect(error.details).toMatchObject({ mapper: 'orders', event: { index: 2, type: 'OrderTotalled', stream: 'order-o9' }, path });
    expect(error.details.problem).toMatch(problem);
    expect(error.details.hint).toMatch(hint);
    expect(error.message).toContain(`mapper "orders": events[2].${path} `);
    expect(error.message).toContain('(type OrderTotalled, stream "order-o9")');
    expect(error.message).toContain(' — fix: ');
  });

  it('refuses a property set to undefined (JSON would drop it silently), naming the field', () => {
    const error = outputErrorOf([ok({ data: { orderId: undefined, status: 'cancelled' } })]);
    expect(error.details.path).toBe('data.orderId');
    expect(error.message).toMatch(/is undefined \(JSON would drop the field\)/);
    expect(error.details.hint).toMatch(/leave the key out/);
  });

  it('accepts JSON: strings, finite numbers, booleans, null, nested arrays and objects, null-prototype objects', () => {
    const bare = Object.assign(Object.create(null) as object, { k: 'v' });
    const data = { s: 'x', n: -1.5, z: 0, b: false, nothing: null, list: [1, 'two', [null], { deep: [true] }], bare };
    const [event] = mapUnit([emitting([ok({ data })])], unit, context).events;
    expect(event!.data).toBe(data);
    expect(JSON.parse(JSON.stringify(event!.data))).toEqual({ s: 'x', n: -1.5, z: 0, b: false, nothing: null, list: [1, 'two', [null], { deep: [true] }], bare: { k: 'v' } });
    // The same object twice (not a cycle) is fine.
    const shared = { a: 1 };
    expect(mapUnit([emitting([ok({ data: { x: shared, y: [shared, shared] } })])], unit, context).events).toHaveLength(1);
  });

  it('metadata values must be strings: names the key', () => {
    const error = outputErrorOf([ok({ metadata: { tenant: undefined } })]);
    expect(error.details.path).toBe('metadata["tenant"]');
    expect(error.message).toMatch(/events\[0\]\.metadata\["tenant"\] must be a string .*it is undefined/);
    expect(outputErrorOf([ok({ metadata: { n: 5 } })]).details.hint).toMatch(/String\(value\)/);
  });

  it('an output that is not a list of events, and checkMappedEvents outside mapUnit (no mapper name)', () => {
    const mapper = defineMapper({ name: 'nothing', tables: { 'public.orders': { columns: ['id'] } }, map: () => null as never });
    expect(() => mapUnit([mapper], unit, context)).toThrow(/mapper "nothing": map must return an array or an iterable of events, got null — fix: return \[\] for none/);
    let caught: unknown;
    try {
      checkMappedEvents([ok({ data: { at: new Date(0) } })]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(MapperOutputError);
    expect((caught as MapperOutputError).details.mapper).toBeNull();
    expect((caught as MapperOutputError).message).toMatch(/^events\[0\]\.data\.at is a Date/);
  });

  it('is exported from the package root next to the other mapper errors', () => {
    expect(RootMapperOutputError).toBe(MapperOutputError);
  });
});

describe('MapperOutputError follows the mapper’s onError', () => {
  const bad = [ok(), ok({ data: { amount: 10n } })];

  it('halt: the line stops with a MapperError whose diagnosis carries the event and field', () => {
    let caught: unknown;
    try {
      mapUnit([emitting(bad, 'halt')], unit, context);
    } catch (error) {
      caught = error;
    }
    const error = caught as MapperError;
    expect(error).toBeInstanceOf(MapperError);
    expect(error.message).toContain('events[1].data.amount is a bigint');
    expect(error.details.cause).toMatchObject({ name: 'MapperOutputError', code: 'MAPPER_OUTPUT_INVALID', output: { mapper: 'orders', event: { index: 1 }, path: 'data.amount' } });
  });

  it('park: none of the mapper’s events go out, a MapperFailed record says exactly what was wrong, the other mappers go on', () => {
    const other = emitting([ok({ type: 'Other' })], 'halt', 'other');
    const { events, failed } = mapUnit([emitting(bad, 'park'), other], unit, context);
    expect(events.map((e) => e.type)).toEqual(['Other']);
    expect(failed).toHaveLength(1);
    const record = failed[0]!;
    expect(record.type).toBe('MapperFailed');
    const cause = (record.data as FailureDiagnosis).cause;
    expect(cause.output).toEqual({ mapper: 'orders', event: { index: 1, type: 'OrderPlaced', stream: 'order-o1' }, path: 'data.amount', problem: 'is a bigint; JSON has no bigint', hint: expect.stringMatching(/String\(value\)/) });
    expect(JSON.parse(JSON.stringify(record.data))).toEqual(record.data); // the record itself is JSON
    // Deterministic, like any MapperFailed record.
    expect(mapUnit([emitting(bad, 'park'), other], unit, context).failed[0]!.id).toBe(record.id);
  });

  it('a snapshot record: the same check, diagnosed by generation', () => {
    const reads = defineMapper({
      name: 'reads',
      onError: 'park',
      tables: { 'public.orders': { columns: ['id'] } },
      map: (tx) => tx.reads('public.orders').map((r) => ({ stream: `order-${String(r.after.id)}`, type: 'OrderSeen', version: 1, data: { seenAt: new Date(0) } })),
    });
    const record = mapUnit([reads], snapshotRecord('public.orders', { id: 'o1' }, { generation: 'g2' }), context).failed[0]!;
    expect(record.data).toMatchObject({ origin: 'snapshot', snapshotGeneration: 'g2', cause: { output: { event: { index: 0, stream: 'order-o1' }, path: 'data.seenAt' } } });
    const halting = defineMapper({ ...reads, onError: 'halt', map: (tx) => tx.reads('public.orders').map(() => ({ stream: 'order-undefined', type: 'OrderSeen', version: 1, data: {} })) });
    expect(() => mapUnit([halting], snapshotRecord('public.orders', { id: 'o1' }), context)).toThrow(/events\[0\]\.stream "order-undefined"/);
  });

  it('a large unit (planLargeUnit): found on the counting run — halt throws before any event, park yields a record and the rest', () => {
    const big: SourceTransaction = transaction(Array.from({ length: 30 }, (_, i) => insert('public.orders', { id: `o${i}`, status: 'new' })));
    const streaming = (onError: OnError): AnyMapper =>
      defineMapper({
        name: 'streaming',
        onError,
        tables: { 'public.orders': { columns: ['id', 'status'] } },
        *map(tx) {
          for (const change of tx.each('public.orders')) {
            const id = String(change.after?.id);
            yield { stream: `order-${id}`, type: 'OrderPlaced', version: 1, data: id === 'o17' ? { at: new Date(0) } : { id } };
          }
        },
      });
    let caught: unknown;
    try {
      drain(planLargeUnit([streaming('halt')], big, context, 7));
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(MapperError);
    expect((caught as MapperError).cause).toBeInstanceOf(MapperOutputError);
    expect(((caught as MapperError).cause as MapperOutputError).details).toMatchObject({ mapper: 'streaming', event: { index: 17, stream: 'order-o17' }, path: 'data.at' });

    const plan = drain(planLargeUnit([streaming('park'), emitting([ok()], 'halt', 'other')], big, context, 7));
    expect(plan.failed).toHaveLength(1);
    expect((plan.failed[0]!.data as FailureDiagnosis).cause.output).toMatchObject({ event: { index: 17 }, path: 'data.at' });
    expect([...plan.produce()].map((e) => e.metadata['mapper'])).toEqual(['other']);
  });
});

describe('the mapper kit surfaces the same error', () => {
  const dated = (onError: OnError) =>
    defineMapper({
      name: 'dated',
      onError,
      tables: { 'public.orders': { columns: ['id'] } },
      map: (tx) => tx.inserts('public.orders').map((c) => ({ stream: `order-${String(c.after.id)}`, type: 'OrderPlaced', version: 1, data: { placedAt: new Date(Date.UTC(2026, 0, 1)) } })),
    });

  it('then() on a halting mapper throws the MapperError naming the field; thenThrows() matches it', () => {
    const spec = mapperSpec(dated('halt')).when([insert('public.orders', { id: 'o1' })]);
    expect(() => spec.then([])).toThrow(/mapper "dated": events\[0\]\.data\.placedAt is a Date .*toISOString/);
    const error = spec.thenThrows(/toISOString/);
    expect(error.cause).toBeInstanceOf(MapperOutputError);
  });

  it('then() on a parking mapper fails the assertion with the cause', () => {
    expect(() => mapperSpec(dated('park')).when([insert('public.orders', { id: 'o1' })]).then([])).toThrow(AssertionError);
    expect(() => mapperSpec(dated('park')).when([insert('public.orders', { id: 'o1' })]).then([])).toThrow(/failed \(parked\): .*data\.placedAt is a Date/);
  });

  it('a function in the data (different in each run) is reported as the invalid output it is, not as impurity', () => {
    const withFunction = defineMapper({
      name: 'with-function',
      tables: { 'public.orders': { columns: ['id'] } },
      map: () => [{ stream: 'order-o1', type: 'OrderPlaced', version: 1, data: { total: () => 3 } }],
    });
    expect(() => mapperSpec(withFunction).when([insert('public.orders', { id: 'o1' })]).then([])).toThrow(/events\[0\]\.data\.total is a function/);
  });
});
