// Ad hoc snapshot requests as WAL messages: the format round-trips, anything else is not a request.
import { describe, expect, it } from 'vitest';
import { adHocSnapshotProgress, decodeSnapshotRequest, encodeSnapshotRequest, newSnapshotRequest, parseSnapshotProgress } from '../../src/source/snapshot/index.js';

describe('snapshot requests', () => {
  it('round-trips through the message content and names a unique request', () => {
    const a = newSnapshotRequest({ assembler: 'invoicing', tables: ['public.invoice', 'public.invoice'], requestedBy: 'ops@host', now: new Date('2026-11-30T00:00:00Z') });
    const b = newSnapshotRequest({ assembler: 'invoicing', tables: ['public.invoice'] });
    expect(a.id).not.toBe(b.id);
    expect(a).toMatchObject({ version: 1, assembler: 'invoicing', tables: ['public.invoice'], requestedAt: '2026-11-30T00:00:00.000Z', requestedBy: 'ops@host' });
    expect(decodeSnapshotRequest(Buffer.from(encodeSnapshotRequest(a)))).toEqual(a);
  });

  it.each([
    ['not JSON', 'hello'],
    ['a watermark', '{"kind":"low","run":"r","generation":"1","table":"public.a","chunk":1}'],
    ['no tables', '{"version":1,"id":"x","assembler":"a","tables":[],"requestedAt":"t","requestedBy":null}'],
    ['another version', '{"version":2,"id":"x","assembler":"a","tables":["public.a"],"requestedAt":"t","requestedBy":null}'],
  ])('%s is not a request', (_name, content) => {
    expect(decodeSnapshotRequest(content)).toBeNull();
  });

  it('the generation it starts records the request, and the record survives validation', () => {
    const progress = adHocSnapshotProgress({ tables: ['public.a'], capturedTables: ['public.a'], lastGeneration: '7', request: { id: 'r1', lsn: '0/1A2B' } });
    expect(progress).toMatchObject({ generation: '8', kind: 'ad_hoc', request: { id: 'r1', lsn: '0/1A2B' } });
    expect(parseSnapshotProgress(JSON.parse(JSON.stringify(progress)))).toEqual(progress);
  });
});
