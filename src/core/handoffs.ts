/**
 * The handoff audit as other folders use it (the CLI, the handoff board and funnel, the UI): traces, lifecycle facts
 * and findings, the budget ledger. The rules themselves live in src/core/rules/handoff/ and are internal to src/core
 * (scripts/check-layers.mjs): import these names from src/core/index.ts.
 */
export * from './rules/handoff/trace.js';
export * from './rules/handoff/lifecycle.js';
export * from './rules/handoff/ledger.js';
export { sameStateVersion } from './rules/handoff/version.js';
export { handoffWork } from './rules/handoff/work.js';
