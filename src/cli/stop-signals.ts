// SIGTERM/SIGINT for the long-running commands (`run`, `project`, `project rebuild`): the first signal stops
// gracefully, a second one exits at once (130 after SIGINT, 143 after SIGTERM) — nothing durable
// is lost that way either, what was not acknowledged is read again on the next start.
import type { Logger } from '../pipeline/index.js';

/** Installs the handlers; the returned function removes them. */
export function onStopSignals(logger: Logger, stop: (signal: NodeJS.Signals) => void, secondSignal: string): () => void {
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      logger.warn(secondSignal, { signal });
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
    logger.info('signal received: stopping gracefully', { signal });
    stop(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  };
}
