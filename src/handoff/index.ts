export * from './schema.js';
export * from './admit.js';
export * from './return.js';
export * from '../core/handoffs.js';
export * from './funnel.js';
export * from './aggregate.js';
export * from './ndjson.js';
export * from './board.js';
