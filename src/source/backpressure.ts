/**
 * When the source stops reading from the replication socket and when it reads again: a pause at
 * any limit (transactions or bytes in flight, messages waiting to be taken in), a resume only once
 * well below all of them (¾ of each in-flight limit, half the waiting messages) — pausing and
 * resuming the socket on every transaction acknowledged at the limit was the top of the source's
 * profile. Pure: the source acts on the answer.
 */

export interface FlowLimits {
  readonly maxInFlightTransactions: number;
  readonly maxInFlightBytes: number;
  readonly maxPendingMessages: number;
}

/** `'pause'` or `'resume'` when reading should change, else null. Scalars, not an object: it runs per transaction. */
export function flowChange(paused: boolean, inFlightTransactions: number, inFlightBytes: number, pendingMessages: number, limits: FlowLimits): 'pause' | 'resume' | null {
  if (!paused) {
    if (inFlightTransactions >= limits.maxInFlightTransactions || inFlightBytes >= limits.maxInFlightBytes || pendingMessages >= limits.maxPendingMessages) return 'pause';
  } else if (inFlightTransactions <= limits.maxInFlightTransactions * 0.75 && inFlightBytes <= limits.maxInFlightBytes * 0.75 && pendingMessages <= limits.maxPendingMessages / 2) {
    return 'resume';
  }
  return null;
}
