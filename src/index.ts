// The public API of event-assembler. Everything a user imports comes from here
// (or from `event-assembler/testing`).
export * from './source/types.js';
export * from './mapping/index.js';
export * from './contracts/index.js';
