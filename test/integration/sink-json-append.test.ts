// appendJsonEvent writes the event the client's appendToStream(stream, jsonEvent(…)) writes —
// type, JSON content type, data bytes, no custom metadata — through Streams.Append with the data
// as bytes; createJsonAppender (the snapshot progress record's path) sends the same data, type and
// JSON content as one framed AppendSession request when the server has it, else appendJsonEvent.
import { describe, expect, it } from 'vitest';
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { appendJsonEvent, createJsonAppender } from '../../src/sink/json-append.js';
import { useInMemoryKurrentDB } from '../support/kurrentdb-rig.js';

const { cleanups, server } = useInMemoryKurrentDB();

async function events(client: KurrentDBClient, stream: string) {
  const out = [];
  for await (const resolved of client.readStream(stream)) out.push(resolved.event!);
  return out;
}

describe('appendJsonEvent', () => {
  it('writes what appendToStream(jsonEvent) writes, appended after what is there', async () => {
    const db = await server();
    const client = KurrentDBClient.connectionString(db.connectionString);
    cleanups.push(() => client.dispose());
    const data = { assembler: 'a', pinnedRuns: [['public.invoice', '0/1A', 7, ['[["id","inv_1"]]', 'ü "q" \\ |']]], n: 1.5, nested: { none: null } };
    await client.appendToStream('by-client', jsonEvent({ type: 'SnapshotProgress', data }));
    await appendJsonEvent(client, 'by-hand', 'SnapshotProgress', data);
    await appendJsonEvent(client, 'by-hand', 'SnapshotProgress', { second: true });
    const [expected] = await events(client, 'by-client');
    const [first, second] = await events(client, 'by-hand');
    // Everything but where it is and its (random) id: type, isJson, data, metadata.
    const what = (event: Record<string, unknown>) => Object.fromEntries(Object.entries(event).filter(([key]) => !['id', 'revision', 'position', 'created', 'streamId'].includes(key)));
    expect(what(first!)).toEqual(what(expected!));
    expect(what(first!)).toMatchObject({ type: 'SnapshotProgress', isJson: true, data });
    expect(first!.revision).toBe(0n);
    expect(second).toMatchObject({ type: 'SnapshotProgress', data: { second: true }, revision: 1n });
    expect(first!.id).not.toBe(second!.id);
  });
});

describe('createJsonAppender', () => {
  const data = { assembler: 'a', pinnedRuns: [['public.invoice', '0/1A', 7, ['[["id","inv_1"]]', 'ü "q" \\ |']]], n: 1.5, nested: { none: null } };

  for (const multiStreamAppend of [true, false]) {
    it(`appends the JSON event in order, ${multiStreamAppend ? 'on the framed connection (AppendSession)' : 'through Streams.Append without AppendSession'}`, async () => {
      const db = await server({ features: { multiStreamAppend } });
      const client = KurrentDBClient.connectionString(db.connectionString);
      cleanups.push(() => client.dispose());
      const appender = createJsonAppender(client, db.connectionString);
      cleanups.push(async () => appender.close());
      await client.appendToStream('progress', jsonEvent({ type: 'Other', data: { before: true } }));
      await appender.append('progress', 'SnapshotProgress', data);
      await appender.append('progress', 'SnapshotProgress', { second: true });
      const [, first, second] = await events(client, 'progress');
      expect(first).toMatchObject({ type: 'SnapshotProgress', isJson: true, data, revision: 1n });
      expect(second).toMatchObject({ type: 'SnapshotProgress', isJson: true, data: { second: true }, revision: 2n });
      expect(first!.id).not.toBe(second!.id);
      expect(appender.framedAppends).toBe(multiStreamAppend ? 2 : 0);
    });
  }

  it('sends a failed framed attempt once more on the full path (same record id: never twice), then fails with the client\'s error', async () => {
    const db = await server();
    const client = KurrentDBClient.connectionString(db.connectionString);
    cleanups.push(() => client.dispose());
    const appender = createJsonAppender(client, db.connectionString);
    cleanups.push(async () => appender.close());
    await appender.append('progress', 'SnapshotProgress', { n: 1 });
    db.failNextAppends(1, 'unavailable');
    await appender.append('progress', 'SnapshotProgress', { n: 2 });
    db.failNextAppends(1, 'unavailable', { afterWrite: true }); // written, the answer lost: the resend is recognised by its id
    await appender.append('progress', 'SnapshotProgress', { n: 3 });
    db.failNextAppends(2, 'unavailable');
    await expect(appender.append('progress', 'SnapshotProgress', { n: 4 })).rejects.toMatchObject({ type: 'unavailable' });
    await appender.append('progress', 'SnapshotProgress', { n: 5 });
    expect((await events(client, 'progress')).map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 5 }]);
    expect(appender.framedAppends).toBe(2);
  });
});
