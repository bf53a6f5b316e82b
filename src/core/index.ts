export * from './types.js';
export * from './edge.js';
export * from './contract.js';
export * from './receipt.js';
export * from './registry.js';
export * from './classify.js';
export * from './meaning.js';
export * from './time.js';
