/**
 * `COPY (…) TO STDOUT` through a `pg` client without an extra dependency: a tiny "submittable"
 * (the extension point `pg` offers for custom protocol flows) that receives CopyData messages,
 * plus a parser for COPY's text format.
 *
 * COPY text output goes through the same type output functions as pgoutput's text tuples, so
 * each field, once unescaped, is exactly what the stream would carry for that value and is
 * decoded with the same decoder (`values.ts`). PostgreSQL sends one CopyData message per row
 * (copyto.c `CopyOneRowTo`), so a message is a whole row.
 *
 * Memory stays bounded: rows are handed out in batches and the socket is paused while more
 * than `highWaterRows` rows wait to be consumed (TCP back-pressure reaches the server).
 */
import type pg from 'pg';
import { interceptCopyData, type DataStream } from '../copy-data.js';
import { utf8Text } from '../utf8-text.js';

const BACKSLASH = 0x5c;

function unescapeField(s: string): string {
  let out = '';
  let start = 0;
  let i = s.indexOf('\\');
  while (i >= 0) {
    out += s.slice(start, i);
    const c = s.charAt(i + 1);
    let consumed = 2;
    switch (c) {
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': {
        const m = /^[0-9a-fA-F]{1,2}/.exec(s.slice(i + 2, i + 4));
        if (m) { out += String.fromCharCode(parseInt(m[0], 16)); consumed = 2 + m[0].length; } else out += 'x';
        break;
      }
      default: {
        const m = /^[0-7]{1,3}/.exec(s.slice(i + 1, i + 4));
        if (m) { out += String.fromCharCode(parseInt(m[0], 8)); consumed = 1 + m[0].length; } else out += c;
      }
    }
    start = i + consumed;
    i = s.indexOf('\\', start);
  }
  return out + s.slice(start);
}

/** One COPY text-format line (without or with its trailing newline) → fields; `\N` → null. */
export function parseCopyTextLine(line: string): (string | null)[] {
  const end = line.endsWith('\n') ? line.length - 1 : line.length;
  const fields: (string | null)[] = [];
  let start = 0;
  for (;;) {
    let tab = line.indexOf('\t', start);
    if (tab < 0 || tab > end) tab = end;
    const raw = line.slice(start, tab);
    if (raw === '\\N') fields.push(null);
    else fields.push(raw.indexOf('\\') >= 0 ? unescapeField(raw) : raw);
    if (tab >= end) break;
    start = tab + 1;
  }
  return fields;
}

/** Escapes a value for COPY text format (used by tests to check the parser round-trip). */
export function escapeCopyText(value: string | null): string {
  if (value === null) return '\\N';
  return value.replace(/[\\\b\f\n\r\t\v]/g, (ch) => {
    switch (ch) {
      case '\\': return '\\\\';
      case '\b': return '\\b';
      case '\f': return '\\f';
      case '\n': return '\\n';
      case '\r': return '\\r';
      case '\t': return '\\t';
      default: return '\\v';
    }
  });
}

export interface CopyOutOptions {
  /** Rows per batch handed out. Default: 1000. */
  readonly batchRows?: number;
  /** Rows waiting in memory before the socket is paused. Default: 4 × batchRows. */
  readonly highWaterRows?: number;
}

interface Connection {
  query(text: string): void;
  stream: DataStream & { pause(): void; resume(): void };
}

/**
 * Runs `COPY (…) TO STDOUT` (text format) on `client` and yields its rows, parsed into text
 * fields, in batches. The client must not be used for anything else until the iterator ends.
 * Breaking out of the loop early leaves the COPY running on the server: end the client (or
 * its transaction) afterwards — callers here always close the connection in that case.
 */
export async function* copyOut(client: pg.ClientBase, sql: string, options: CopyOutOptions = {}): AsyncGenerator<(string | null)[][]> {
  const batchRows = options.batchRows ?? 1000;
  const highWater = options.highWaterRows ?? batchRows * 4;
  let queue: (string | null)[][] = [];
  let done = false;
  let error: Error | null = null;
  let paused = false;
  let connection: Connection | null = null;
  let wake: (() => void) | null = null;
  const signal = () => {
    const w = wake;
    wake = null;
    w?.();
  };

  /** One row: a CopyData message's bytes `start` … `end - 1` of `chunk`. */
  const onRow = (chunk: Buffer, start: number, end: number): void => {
    // A row ends with '\n'; an empty message would be a protocol oddity, skip it.
    if (end <= start || (end === start + 1 && chunk[start] === BACKSLASH)) return;
    queue.push(parseCopyTextLine(utf8Text(chunk, start, end)));
    if (queue.length >= highWater && !paused && connection) {
      paused = true;
      connection.stream.pause();
    }
    if (queue.length >= batchRows) signal();
  };

  const submittable = {
    text: sql,
    submit(con: Connection) {
      connection = con;
      // The rows straight off the socket (copy-data.ts); where that cannot be set up pg calls handleCopyData.
      interceptCopyData(con.stream, onRow);
      con.query(sql);
    },
    handleCopyData(msg: { chunk: Buffer }) {
      onRow(msg.chunk, 0, msg.chunk.length);
    },
    handleCommandComplete() {},
    handleRowDescription() {},
    handleDataRow() {},
    handleEmptyQuery() {},
    handleCopyInResponse() {},
    handlePortalSuspended() {},
    handleError(err: Error) {
      error = err;
      if (paused && connection) { paused = false; connection.stream.resume(); }
      signal();
    },
    handleReadyForQuery() {
      done = true;
      signal();
    },
  };
  (client as unknown as { query(q: unknown): unknown }).query(submittable);

  for (;;) {
    if (queue.length >= batchRows || ((done || error) && queue.length > 0)) {
      const batch = queue.length > batchRows ? queue.slice(0, batchRows) : queue;
      queue = queue.length > batchRows ? queue.slice(batchRows) : [];
      if (paused && queue.length < highWater / 2 && connection) {
        paused = false;
        (connection as Connection).stream.resume();
      }
      yield batch;
      continue;
    }
    if (error) throw error;
    if (done) return;
    if (paused && connection) {
      paused = false;
      (connection as Connection).stream.resume();
    }
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
  }
}
