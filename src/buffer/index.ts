/**
 * Stage `buffer/`: groups decoded pgoutput messages by transaction until commit and hands out
 * complete transactions in commit order, holding at most `memoryLimitBytes` of decoded changes
 * in memory and spilling the rest to disk.
 */
export type { CommittedTransaction, NonTransactionalMessage, TransactionBuffer, TransactionBufferOptions } from './types.js';
export { createTransactionBuffer, DEFAULT_MEMORY_LIMIT_BYTES } from './transaction-buffer.js';
export { readChanges, readChangesNow, withChanges } from './materialize.js';
