/**
 * What the sink's steps share: settings, the client, what is known of streams, counters, and
 * the one place destination outages are waited out. Built once by `createKurrentDBSink`.
 */
import type { KurrentDBClient } from '@kurrent/kurrentdb-client';
import type { SinkConfig, SinkHooks, SinkLogger } from './options.js';
import type { Revision, StreamStates } from './stream-states.js';
import type { SinkMode } from './types.js';
import type { EncodedStreamAppend, MultiStreamAppendResult } from './v2-append.js';

export interface SinkStats {
  state: 'connected' | 'retrying' | 'closed';
  attempts: number;
  retries: number;
  lastError: { readonly message: string; readonly code: string | null; readonly at: Date } | null;
  appendedEvents: number;
  skippedEvents: number;
  tailReads: number;
  logHeadReads: number;
  prefetchHits: number;
  splitCalls: number;
}

export interface SinkContext {
  readonly config: SinkConfig;
  readonly logger: SinkLogger;
  readonly hooks: SinkHooks;
  readonly client: KurrentDBClient;
  readonly states: StreamStates;
  readonly stats: SinkStats;
  /** The max append size in force: the configured one, or the server's once it said it is smaller. */
  limit: number;
  mode: SinkMode;
  /** Multi-stream appends with records encoded once, by hand (v2-append.ts); else the client's own. */
  readonly encoded: boolean;
  sendEncoded(requests: readonly EncodedStreamAppend[]): Promise<MultiStreamAppendResult>;
  /** Runs one client call, waiting out destination outages with backoff. Everything else is thrown as is. */
  retrying<T>(operation: string, details: Record<string, unknown>, call: () => Promise<T>): Promise<T>;
}

/** Re-plans in a row that taught nothing new (no events written, no stream state learned) before giving up. */
export const MAX_STALLED_ROUNDS = 8;

export function errorType(error: unknown): string | undefined {
  const type = (error as { type?: unknown } | null)?.type;
  return typeof type === 'string' ? type : undefined;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function revisionText(revision: Revision | bigint | string | undefined | null): string {
  if (revision === undefined || revision === null) return 'unknown';
  return typeof revision === 'bigint' ? revision.toString() : revision;
}
