// The receipt shape the engine benches share (bench/engine.mjs, bench/cluster-memory.mjs): one place, so their runs are
// the same runs. Content-free: ids, enums and times only.
const iso = (ms) => new Date(ms).toISOString();
const CONTRACT = 'research-publish';

/**
 * The k-th receipt of a run, in the shape bench/ingest.mjs sends: run.start, the first delegation, then cycles
 * of a declared wait on the verifier, the researcher's handoff to the verifier, the verifier's return (which
 * meets the wait) and a new delegation (to the researcher or a search agent). Repeated edges exceed the
 * contract's `max`, so long runs are `ambiguous_route` (settled), as they would be on this contract.
 * `openWaits`: the verifier never returns, so every declared wait stays open (one `waiting` finding each):
 * the adversarial shape for incremental cost. Content-free: ids, enums and times only.
 */
export function receiptOf(run, k, t0, openWaits = false) {
  const at = iso(t0 + k * 1000);
  const event = `e${k}`;
  if (k === 0) return { run, event, type: 'run.start', at, version: '3', contract: CONTRACT, phase: 'research', from: 'orchestrator' };
  if (k === 1) return { run, event, type: 'edge', at, version: '3', from: 'orchestrator', to: 'researcher', kind: 'delegate' };
  switch (k % 4) {
    case 2:
      return { run, event, type: 'wait', at, version: '3', on: 'verifier', edge: 'verifier -> orchestrator : return', deadline: iso(t0 + k * 1000 + 600_000), from: 'researcher' };
    case 3:
      return { run, event, type: 'edge', at, version: '3', from: 'researcher', to: 'verifier', kind: 'handoff' };
    case 0:
      if (!openWaits) return { run, event, type: 'edge', at, version: '3', from: 'verifier', to: 'orchestrator', kind: 'return' };
    // falls through: no return, another delegation instead
    default: {
      const to = ['researcher', 'web-search', 'doc-search'][Math.floor(k / 4) % 3];
      return { run, event, type: 'edge', at, version: '3', from: 'orchestrator', to, kind: 'delegate' };
    }
  }
}
