/** topology-audit as a library: the pure verdict and its formats. The emitter is at `topology-audit/emitter`. */
export * from './core/index.js';
/** Contracts from a directory (the file reading src/core leaves to its callers). */
export { loadContractDir } from './audit/contracts-dir.js';
