/** Receipt emitter for TypeScript agent code: content-free by construction, never sampled away. */
export { ReceiptEmitter, ReceiptExportError, DEFAULT_OTLP_ENDPOINT, edgeRef } from './emitter.js';
export type { EdgeRef, ReceiptEmitterOptions, ReceiptOptions } from './emitter.js';
export { agentId, runId, contractId, phaseId, contractVersion, newRunId, NotAnIdError } from './ids.js';
export type { AgentId, RunId, ContractId, PhaseId, ContractVersion } from './ids.js';
export { receiptSpanAttributes } from './attributes.js';
export type { EdgeKind, RunResult } from '@topology-audit/receipt';
export { OpenAIAgentsReceiptProcessor } from './openai-agents.js';
export type { OpenAIAgentsProcessorOptions, SdkSpan, SdkTrace } from './openai-agents.js';
