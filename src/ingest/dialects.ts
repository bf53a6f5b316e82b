/**
 * Agent-framework dialects: how spans from instrumentations that know nothing of topology-audit become
 * edges. Each mapping is a small named function (one module per framework under ./dialects/) from one span
 * to an agent span (whose caller is resolved through parentage or links), a handoff (whose source or target
 * may be resolved on other spans), direct receipts, or nothing. Where an end cannot be determined, the
 * result is a `gap` receipt (the run becomes uncertain), never an invented edge. docs/dialects.md ("Framework dialects") has the table.
 */
import type { Dialect } from './dialects/common.js';
import { adkTransfer } from './dialects/adk.js';
import { genaiInvokeAgent, genaiProposedHandoff } from './dialects/genai.js';
import { mafEdgeGroup, mafExecutor, mafMessageSend } from './dialects/maf.js';
import { openinferenceAgent, openinferenceGraph } from './dialects/openinference.js';
import { aiSdkCall } from './dialects/aisdk.js';
import { openllmetryAgent, openllmetryHandoff } from './dialects/openllmetry.js';
import { voltAgentOperation } from './dialects/voltagent.js';
import { lcAgentLoop, typedAgent } from './dialects/typed.js';

export type { Dialect, DialectResult } from './dialects/common.js';
export { directEdge, targetGap } from './dialects/common.js';
export { adkTransfer, aiSdkCall, genaiInvokeAgent, openinferenceAgent, genaiProposedHandoff, mafEdgeGroup, mafExecutor, mafMessageSend, openinferenceGraph, openllmetryAgent, openllmetryHandoff, voltAgentOperation, lcAgentLoop, typedAgent };

/**
 * Tried in order; the first that recognises a span wins. Handoff attributes come first: the proposed GenAI
 * handoff sits on an `execute_tool` span, which the ADK transfer mapping would otherwise read.
 */
export const DIALECTS: Dialect[] = [
  genaiProposedHandoff,
  openllmetryHandoff,
  adkTransfer,
  genaiInvokeAgent,
  openllmetryAgent,
  openinferenceGraph,
  openinferenceAgent,
  aiSdkCall,
  voltAgentOperation,
  mafExecutor,
  mafEdgeGroup,
  mafMessageSend,
  // The general rules last: a named dialect's reading of a span always wins (docs/dialects.md "Agent recognition by rule").
  lcAgentLoop,
  typedAgent,
];
