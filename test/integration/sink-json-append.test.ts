// appendJsonEvent writes the event the client's appendToStream(stream, jsonEvent(…)) writes —
// type, JSON content type, data bytes, no custom metadata — through Streams.Append with the data
// as bytes (the snapshot progress record goes this way).
import { describe, expect, it } from 'vitest';
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { appendJsonEvent } from '../../src/sink/json-append.js';
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
