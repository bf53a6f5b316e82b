/** topology-audit as a library: the pure verdict and its formats. The receipt emitter is the separate package `@topology-audit/emitter` (packages/emitter). */
export * from './core/index.js';
/** Contracts from a directory (the file reading src/core leaves to its callers). */
export { loadContractDir } from './audit/contracts-dir.js';
