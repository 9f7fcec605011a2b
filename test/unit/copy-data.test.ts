// CopyData taken off a pg socket in place (src/source/copy-data.ts): cut at every kind of boundary,
// the CopyData payloads and pg's messages arrive in the order the server sent them, and the socket
// goes back to pg's parser at ReadyForQuery with what follows it.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Parser } from 'pg-protocol/dist/parser.js';
import { createPrng } from '../../examples/invoicing/workload.js';
import { interceptCopyData } from '../../src/source/copy-data.js';

function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}

const copyData = (text: string) => message('d', Buffer.from(text, 'utf8'));
const copyOutResponse = () => message('H', Buffer.from([0, 0, 1, 0, 0]));
const notice = (text: string) => message('N', Buffer.concat([Buffer.from(`M${text}\0`, 'utf8'), Buffer.from([0])]));
const copyDone = () => message('c', Buffer.alloc(0));
const commandComplete = (tag: string) => message('C', Buffer.from(`${tag}\0`, 'latin1'));
const readyForQuery = () => message('Z', Buffer.from('I', 'latin1'));

/** `bytes` cut into chunks: at every offset in `at`, else of random lengths (1 byte … 3 × 64 KiB). */
function cut(bytes: Buffer, next: () => number, at?: number[]): Buffer[] {
  const points = at ?? [];
  if (!at) for (let o = 0; o < bytes.length; ) points.push((o += 1 + Math.floor(next() ** 3 * 3 * 65536)));
  const chunks: Buffer[] = [];
  let from = 0;
  for (const p of [...points, bytes.length]) {
    const to = Math.min(p, bytes.length);
    if (to > from) chunks.push(bytes.subarray(from, to));
    from = Math.max(from, to);
  }
  return chunks;
}

/**
 * A pg connection's socket as pg sets it up: one `data` listener, pg-protocol's parser. Returns what
 * happened, in order: `copy <payload>` from the interception, `pg <name>[ <payload>]` from pg's parser.
 */
function socket(): { stream: EventEmitter; log: string[] } {
  const stream = new EventEmitter();
  const parser = new Parser();
  const log: string[] = [];
  stream.on('data', (chunk: Buffer) =>
    parser.parse(chunk, (msg) => {
      const m = msg as { name: string; chunk?: Buffer };
      log.push(m.name === 'copyData' ? `pg copyData ${m.chunk!.toString('utf8')}` : `pg ${m.name}`);
    }),
  );
  return { stream, log };
}

describe('interceptCopyData', () => {
  const rows = Array.from({ length: 400 }, (_, i) => `${i}\tinvoice-${i}\t${'x'.repeat((i * 37) % 300)}\n`);
  rows[17] = `17\t${'big'.repeat(80_000)}\n`; // a row over three 64 KiB chunks
  const before = [copyOutResponse(), notice('first')];
  const after = [copyDone(), commandComplete('COPY 400'), readyForQuery(), notice('after ready'), copyData('after ready'), readyForQuery()];
  const messages = [...before, ...rows.slice(0, 200).map(copyData), notice('between rows'), ...rows.slice(200).map(copyData), ...after];
  const wire = Buffer.concat(messages);
  const expected = [
    'pg copyOutResponse', 'pg notice',
    ...rows.slice(0, 200).map((r) => `copy ${r}`), 'pg notice', ...rows.slice(200).map((r) => `copy ${r}`),
    'pg copyDone', 'pg commandComplete', 'pg readyForQuery', 'pg notice', 'pg copyData after ready', 'pg readyForQuery',
  ];

  function run(chunks: Buffer[]): { log: string[]; stream: EventEmitter; released: boolean } {
    const { stream, log } = socket();
    const interception = interceptCopyData(stream, (buffer, start, end) => log.push(`copy ${buffer.toString('utf8', start, end)}`));
    expect(interception).not.toBeNull();
    for (const chunk of chunks) stream.emit('data', chunk);
    return { log, stream, released: interception!.released };
  }

  it('delivers every message in order, whatever the chunks, and hands back at ReadyForQuery', () => {
    const cases: Buffer[][] = [[wire], cut(wire, () => 0, Array.from({ length: wire.length }, (_, i) => i + 1).filter((i) => i < 2000 || i % 997 === 0))];
    for (let seed = 1; seed <= 40; seed++) cases.push(cut(wire, createPrng(seed)));
    // Cuts at each byte of a message header, and right before and after ReadyForQuery.
    const zAt = wire.length - Buffer.concat(after.slice(2)).length;
    for (const k of [1, 2, 3, 4, 5, 6]) cases.push(cut(wire, () => 0, [k, 7 + k, zAt - 1, zAt, zAt + 1, zAt + 6]));
    for (const chunks of cases) {
      const { log, stream, released } = run(chunks);
      expect(log).toEqual(expected);
      expect(released).toBe(true);
      expect(stream.listenerCount('data')).toBe(1);
    }
  });

  it('release() hands back a message begun but not finished', () => {
    const { stream, log } = socket();
    const interception = interceptCopyData(stream, (buffer, start, end) => log.push(`copy ${buffer.toString('utf8', start, end)}`))!;
    const rest = Buffer.concat([copyData('two'), readyForQuery()]);
    stream.emit('data', Buffer.concat([copyData('one'), rest.subarray(0, 4)]));
    interception.release();
    stream.emit('data', rest.subarray(4));
    expect(log).toEqual(['copy one', 'pg copyData two', 'pg readyForQuery']);
    expect(interception.released).toBe(true);
  });

  it('leaves the socket alone unless pg’s parser is its only data listener', () => {
    const { stream } = socket();
    stream.on('data', () => {});
    expect(interceptCopyData(stream, () => {})).toBeNull();
    expect(stream.listenerCount('data')).toBe(2);
    expect(interceptCopyData(new EventEmitter(), () => {})).toBeNull();
  });

  it('gives a message length no message has to pg’s parser, as it came', () => {
    const { stream, log } = socket();
    const interception = interceptCopyData(stream, (buffer, start, end) => log.push(`copy ${buffer.toString('utf8', start, end)}`))!;
    const bad = Buffer.from([0x64, 0, 0, 0, 2, 0x41]);
    stream.emit('data', Buffer.concat([copyData('ok'), bad]));
    expect(interception.released).toBe(true);
    // What pg's parser alone makes of the same bytes, and nothing more.
    const plain = socket();
    plain.stream.emit('data', bad);
    expect(log).toEqual(['copy ok', ...plain.log]);
  });
});
