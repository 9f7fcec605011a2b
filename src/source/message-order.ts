/**
 * Keeps decoded messages in stream order on their way into the transaction intake, although the
 * buffer sometimes has to wait for the disk: a message is taken in at once when nothing waits
 * before it (the hot path — no promise per message), otherwise it runs after everything queued
 * before it. Counts the messages not yet taken in, for backpressure and idleness.
 */
import type { PgoutputMessage } from './pgoutput/messages.js';

export interface MessageOrderOptions {
  /** Takes one message in; a promise only when it has to wait. */
  take(message: PgoutputMessage, walStart: bigint, size: number): Promise<void> | undefined;
  /** True once the source failed: messages still arriving are ignored. */
  failed(): boolean;
  onError(error: unknown): void;
  /** What is pending changed, or a transaction completed: backpressure may have to change. */
  onFlowCheck(): void;
  /** Pending messages at which the flow is checked at once. */
  readonly maxPending: number;
}

export interface MessageOrder {
  /** One message from the replication stream, in stream order. */
  push(message: PgoutputMessage, walStart: bigint, size: number): void;
  /** Runs `work` after everything queued before it; it counts as pending until it has run. */
  after(work: () => Promise<void> | undefined): void;
  /** Messages (and work) queued and not yet run. */
  readonly pending: number;
  /** Settles once everything queued so far has run. */
  drained(): Promise<void>;
}

export function createMessageOrder(options: MessageOrderOptions): MessageOrder {
  let pending = 0;
  let chain: Promise<void> = Promise.resolve();

  function after(work: () => Promise<void> | undefined): void {
    pending += 1;
    if (pending >= options.maxPending) options.onFlowCheck();
    chain = chain
      .then(work)
      .then(undefined, options.onError)
      .finally(() => {
        pending -= 1;
        options.onFlowCheck();
      });
  }

  return {
    push(message, walStart, size) {
      if (pending > 0) {
        after(() => (options.failed() ? undefined : options.take(message, walStart, size)));
        return;
      }
      // The hot path: nothing is queued before this message (so order holds), and the buffer
      // takes it in at once unless it has to wait for the disk.
      if (options.failed()) return;
      let wait: Promise<void> | undefined;
      try {
        wait = options.take(message, walStart, size);
      } catch (error) {
        options.onError(error);
        return;
      }
      if (wait === undefined) {
        if (message.tag === 'commit' || message.tag === 'stream-commit') options.onFlowCheck();
        return;
      }
      // Its failure is handled now (not when the chain gets to it); what comes next waits for it.
      const waiting = wait.then(undefined, options.onError);
      after(() => waiting);
    },
    after,
    get pending() {
      return pending;
    },
    drained: () => chain.catch(() => {}),
  };
}
