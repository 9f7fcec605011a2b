// From a KurrentDB event as the client returns it to the event a handler receives: metadata the
// assembler writes (src/mapping/map-unit.ts, receipts in src/sink/receipt.ts) read into typed fields.
import type { AllStreamResolvedEvent } from '@kurrent/kurrentdb-client';
import { receiptFromMetadata } from '../sink/receipt.js';
import { decodeCheckpoint, isLsn } from '../source/position.js';
import type { EventSource, ProjectionEvent, SourceVersion } from './types.js';

/** The event as it arrives, before contracts: what the kit needs of a recorded `$all` event. */
export interface RecordedInput {
  readonly id: string;
  readonly type: string;
  readonly stream: string;
  readonly revision: bigint;
  readonly position: { readonly commit: bigint; readonly prepare: bigint };
  readonly data: unknown;
  readonly metadata: unknown;
}

/** The recorded event of a subscription message, or `null` for one without (links only). */
export function recordedInput(resolved: AllStreamResolvedEvent): RecordedInput | null {
  const event = resolved.event;
  if (!event) return null;
  let data: unknown = event.data;
  if (!event.isJson && data instanceof Uint8Array) data = decodeJson(data);
  let metadata: unknown = event.metadata;
  if (metadata instanceof Uint8Array) metadata = decodeJson(metadata);
  return { id: event.id, type: event.type, stream: event.streamId, revision: event.revision, position: event.position, data, metadata };
}

function decodeJson(bytes: Uint8Array): unknown {
  const text = Buffer.from(bytes).toString('utf8');
  if (text === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function stringMetadata(metadata: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) return out;
  for (const [key, value] of Object.entries(metadata as Record<string, unknown>)) if (typeof value === 'string') out[key] = value;
  return out;
}

function integer(value: string | undefined): number | null {
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : null;
}

function snapshotKind(value: string | undefined): { kind?: 'initial' | 'incremental' | 'ad_hoc' } {
  return value === 'initial' || value === 'incremental' || value === 'ad_hoc' ? { kind: value } : {};
}

function sourceOf(m: Record<string, string>): EventSource {
  // The receipt in either of its forms (receipt.ts): the snapshot record's position, the source system.
  const receipt = receiptFromMetadata(m);
  if (m['origin'] === 'snapshot' && m['snapshot.generation'] !== undefined) {
    const record = receipt?.kind === 'snapshot' ? receipt : null;
    return {
      origin: 'snapshot',
      generation: m['snapshot.generation'],
      lsn: record?.lsn ?? null,
      sequence: record?.sequence ?? null,
      systemId: receipt?.source ?? null,
      ...snapshotKind(m['snapshot.kind']),
    };
  }
  const checkpoint = m['source.checkpoint'];
  const commitLsn = m['source.commitLsn'];
  const xid = integer(m['source.xid']);
  if (checkpoint === undefined || commitLsn === undefined || !isLsn(commitLsn) || xid === null) return { origin: 'unknown' };
  let systemId: string | null = receipt?.source ?? null;
  let timeline: number | null = null;
  try {
    const position = decodeCheckpoint(checkpoint);
    systemId = position.systemId;
    timeline = position.timeline;
  } catch {
    // A checkpoint of another format: the system stays what the receipt says, if anything.
  }
  return { origin: 'change', checkpoint, commitLsn, xid, commitTime: m['source.commitTime'] ?? null, systemId, timeline };
}

function versionOf(source: EventSource, ordinal: number | null): SourceVersion | null {
  if (ordinal === null || source.origin === 'unknown' || source.systemId === null) return null;
  if (source.origin === 'change') return { systemId: source.systemId, lsn: source.commitLsn, kind: 'change', generation: null, sequence: null, ordinal };
  if (source.lsn === null || source.sequence === null) return null;
  return { systemId: source.systemId, lsn: source.lsn, kind: 'snapshot', generation: source.generation, sequence: source.sequence, ordinal };
}

/** `contract` metadata (`type@version`) → the version, when it names this type. */
function contractVersion(m: Record<string, string>, type: string): number | null {
  const contract = m['contract'];
  if (contract === undefined) return null;
  const at = contract.lastIndexOf('@');
  return contract.slice(0, at) === type ? integer(contract.slice(at + 1)) : null;
}

/** The typed event (data as recorded; contracts and upcasting come after, see contract-step.ts). */
export function toProjectionEvent(input: RecordedInput): ProjectionEvent {
  const metadata = stringMetadata(input.metadata);
  const source = sourceOf(metadata);
  const index = integer(metadata['transaction.index']);
  const count = integer(metadata['transaction.count']);
  const entityType = metadata['entity.type'];
  const entityId = metadata['entity.id'];
  return {
    id: input.id,
    type: input.type,
    version: contractVersion(metadata, input.type),
    data: input.data,
    stream: input.stream,
    revision: input.revision,
    position: { commit: input.position.commit, prepare: input.position.prepare },
    source,
    transaction: index !== null && count !== null ? { index, count, correlationId: metadata['$correlationId'] ?? null } : null,
    entity: entityType !== undefined && entityId !== undefined ? { type: entityType, id: entityId } : null,
    sourceVersion: versionOf(source, index),
    metadata,
  };
}
