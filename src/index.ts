/** topology-audit as a library: the pure verdict and its formats. The emitter is at `topology-audit/emitter`. */
export * from './core/index.js';
