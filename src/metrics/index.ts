export * from './registry.js';
export * from './audit-metrics.js';
