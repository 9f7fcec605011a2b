// The destination check: the reference slot's snapshot and history, mapped independently with
// the same mappers, must equal what KurrentDB holds (nothing missing, duplicated, extra or out
// of order), and no customer email or card_number may appear in any event, data or metadata.
import { FORWARDS, KurrentDBClient, START } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { failedRecordsStream, type AnyMapper } from '../../../mapping/index.js';
import { stateStreamName } from '../../../sink/index.js';
import { verifyDestination, type DestinationReport, type ExpectedEvent } from '../../../testing/verify-destination.js';
import { withClient } from './connections.js';
import type { DemoNames } from './names.js';

export interface CheckSettings {
  readonly names: DemoNames;
  readonly admin: string;
  readonly capture: string;
  readonly kurrentdb: string;
  readonly mappers: readonly AnyMapper[];
  /** The events the reference slot's exported snapshot maps to. */
  readonly expectedBefore: readonly ExpectedEvent[];
}

export interface CheckResult {
  readonly report: DestinationReport;
  readonly sensitive: { readonly checkedValues: number; readonly found: number };
}

export async function checkDestination(settings: CheckSettings): Promise<CheckResult> {
  const { names } = settings;
  // On a shared KurrentDB only this run's streams count: its entity streams carry the run's id prefix.
  const streamPrefixes = names.idPrefix ? [`customer-${names.idPrefix}_`, `invoice-${names.idPrefix}_`] : null;
  const checkpointStream = `event-assembler.checkpoint-${names.assembler}`;
  const snapshotStream = `event-assembler.snapshot-${names.assembler}`;
  const carriedStates = stateStreamName(names.assembler);
  const ignoreStream = (stream: string) =>
    stream.startsWith('$') ||
    stream === checkpointStream ||
    stream === snapshotStream ||
    stream === carriedStates ||
    (streamPrefixes !== null && stream !== failedRecordsStream(names.assembler) && !streamPrefixes.some((p) => stream.startsWith(p)));
  const report = await verifyDestination({
    source: { connection: settings.capture, slot: names.referenceSlot, publication: names.publication },
    destination: { connectionString: settings.kurrentdb },
    mappers: settings.mappers,
    assembler: names.assembler,
    expectedBefore: settings.expectedBefore,
    ignoreStream,
  });
  const customer = `${pg.escapeIdentifier(names.schema)}.customer`;
  const sensitiveValues = await withClient(settings.admin, async (c) =>
    (await c.query<{ v: string }>(`SELECT email AS v FROM ${customer} UNION ALL SELECT card_number FROM ${customer} WHERE card_number IS NOT NULL`)).rows.map((r) => r.v),
  );
  const found = await countSensitive(settings.kurrentdb, ignoreStream, new Set(sensitiveValues));
  return { report, sensitive: { checkedValues: sensitiveValues.length, found } };
}

/** One pass over the destination: sensitive values anywhere in data or metadata. */
async function countSensitive(connectionString: string, ignoreStream: (stream: string) => boolean, sensitive: ReadonlySet<string>): Promise<number> {
  const client = KurrentDBClient.connectionString(connectionString);
  let found = 0;
  const candidates = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}|\d{12,19}/g;
  try {
    for await (const resolved of client.readAll({ direction: FORWARDS, fromPosition: START, resolveLinkTos: false })) {
      const event = resolved.event;
      if (!event || ignoreStream(event.streamId)) continue;
      const raw = `${JSON.stringify(event.data)} ${JSON.stringify(event.metadata)}`;
      for (const match of raw.match(candidates) ?? []) if (sensitive.has(match)) found += 1;
    }
  } finally {
    await client.dispose();
  }
  return found;
}
