/** The verdict rules, one module per family; `evaluate` (src/core/classify.ts) composes them. */
export * from './context.js';
export { evidenceRules, noPinRule, pinRules } from './evidence.js';
export { agentRules } from './agents.js';
export { routeRules } from './routes.js';
export { planRules } from './plan.js';
export { waitRules } from './waits.js';
export { stallRules, endRules } from './completion.js';
export { handoffRules } from './handoffs.js';
