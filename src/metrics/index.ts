export * from './registry.js';
export * from './audit-metrics.js';
export * from './alertmanager-metrics.js';
export * from './ingest-totals.js';
