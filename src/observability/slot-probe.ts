/**
 * The slot's signals on demand — at scrape time — with a short cache and one query in flight at
 * most: Prometheus, `/readyz` and `/status.json` asked together cost one query. A failed reading
 * is kept as an error (the metrics then show `event_assembler_slot_probe_up 0`, never stale
 * values as if they were current).
 */
import type { SideConnection } from './side-connection.js';
import { readSlot, type SlotReading } from './slot-reading.js';

export interface SlotProbeResult {
  /** `null` when the reading failed. */
  readonly reading: SlotReading | null;
  readonly error: string | null;
}

export interface SlotProbe {
  read(): Promise<SlotProbeResult>;
}

export function createSlotProbe(connection: SideConnection, slot: string, maxAgeMs: number, now: () => number = Date.now): SlotProbe {
  let last: { result: SlotProbeResult; at: number } | null = null;
  let inFlight: Promise<SlotProbeResult> | null = null;
  return {
    read() {
      if (last && now() - last.at < maxAgeMs) return Promise.resolve(last.result);
      inFlight ??= connection
        .use((client) => readSlot(client, slot))
        .then(
          (reading): SlotProbeResult => ({ reading, error: null }),
          (error: unknown): SlotProbeResult => ({ reading: null, error: error instanceof Error ? error.message : String(error) }),
        )
        .then((result) => {
          last = { result, at: now() };
          inFlight = null;
          return result;
        });
      return inFlight;
    },
  };
}
