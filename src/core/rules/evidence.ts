/** Evidence and pin rules: conflicts and gaps (uncertain, whatever the pin), no pin, and stale_contract. */
import type { RunState } from '../state.js';
import { startRef } from '../state.js';
import { namesPin } from '../pin.js';
import { sortStr, type Collector, type EvalContext } from './context.js';

/** Conflicting deliveries and declared gaps: uncertain until the evidence is fixed. */
export function evidenceRules(state: RunState, out: Collector): void {
  if (state.conflicts.size > 0) {
    for (const [event, c] of state.conflicts) {
      out.add({
        verdict: 'uncertain',
        code: 'conflict',
        events: [event],
        message: `event ${event} was delivered ${c.canons.length} times with different content; neither is used: fix the emitter's event ids`,
        settled: false,
      });
    }
  }
  for (const g of state.gaps) {
    out.add({
      verdict: 'uncertain',
      code: 'gap',
      agents: g.to ? [g.to] : [],
      events: [g.event],
      message: `evidence has a hole (${g.reason}${g.to ? ` for ${g.to}` : ''}): the verdict stays uncertain until the missing evidence arrives`,
      settled: false,
    });
  }
}

/** No resolvable pin: nothing else can be judged. */
export function noPinRule(reason: string, out: Collector): void {
  out.add({ verdict: 'uncertain', code: 'no_pin', message: `no resolvable pinned contract: ${reason}`, settled: false });
}

/** stale_contract: a retired pin, receipts of another version, a later run.start naming another pin. */
export function pinRules(ctx: EvalContext, out: Collector): void {
  const { state, pin, contract, where, registry, first } = ctx;
  if (contract.retired) {
    out.add({ verdict: 'stale_contract', code: 'retired_version', message: `the pinned version ${where} is retired: stop comparing the run with the wrong design; start runs on a current version`, settled: true });
  }
  if (!state.onlyVersion(pin.version)) {
    const others = [...state.versions.keys()].filter((v) => v !== pin.version);
    const events = state.versionEventsOf(others); // one walk over the run for all of them
    others.forEach((version, i) => {
      out.add(
        {
          verdict: 'stale_contract',
          code: 'version_mismatch',
          events: sortStr(events[i]),
          message: `receipts carry version "${version}" but the run is pinned to "${pin.version}" (${where}): stop comparing the run with the wrong design`,
          settled: true,
        },
        true,
      );
    });
  }
  if (state.starts.length > 1) {
    for (const s of state.starts) {
      if (s === first) continue;
      const ref = startRef(s);
      const res = registry ? registry.resolve(ref) : null;
      const same = res
        ? res.ok && res.pin.contract === pin.contract && res.pin.version === pin.version && res.pin.phase === pin.phase
        : namesPin(ref, pin);
      if (!same) {
        out.add({
          verdict: 'stale_contract',
          code: 'repinned',
          events: [s.event],
          message: `a later run.start names ${ref.contract}@${ref.version ?? '(newest)'}/${ref.phase ?? '(first phase)'} but the run is pinned to ${where}/${pin.phase}: a run never adopts a new version midway`,
          settled: true,
        });
      }
    }
  }
}
