export * from './overlay.js';
export * from './labels.js';
export * from './layout.js';
export * from './svg.js';
export * from './mermaid.js';
export * from './dot.js';
export * from './contract-diff.js';
