// Issue 30.3: one request naming thousands of unknown agents froze the server (2,000 agents: 9.6 s; 4,000: 58 s),
// because the unknown_agent rule walked the whole run once per unknown agent (and, live, each walk read the run back
// from the store). The walk is now one per evaluation whatever the number of agents or versions named: counted here
// through the receipt source a live RunState reads (the store in the server).
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunState, evaluate, resolvePin } from '../src/core/classify.js';
import type { Receipt } from '../src/core/types.js';
import { loadContractDir } from '../src/audit/contracts-dir.js';

const registry = loadContractDir(join(import.meta.dirname, '..', 'contracts'));
const T0 = Date.UTC(2026, 0, 1);
const iso = (ms: number) => new Date(ms).toISOString();

function wideRun(agents: number, versions: number): Receipt[] {
  const rs: Receipt[] = [{ run: 'wide', event: 's', type: 'run.start', at: iso(T0), contract: 'research-publish', version: '3', phase: 'research', from: 'orchestrator' }];
  for (let i = 0; i < agents; i++) {
    rs.push({ run: 'wide', event: `e${i}`, type: 'edge', at: iso(T0 + i + 1), from: 'orchestrator', to: `unknown-${i}`, kind: 'delegate', ...(versions ? { version: `v${i % versions}` } : {}) });
  }
  return rs;
}

describe('a run naming thousands of agents is evaluated with one walk over its receipts', () => {
  for (const [agents, versions] of [
    [2000, 0],
    [2000, 500],
  ] as const) {
    it(`${agents} unknown agents${versions ? `, ${versions} foreign versions` : ''}: every agent reported, the source read at most twice`, () => {
      const receipts = wideRun(agents, versions);
      let reads = 0;
      const state = new RunState('wide', () => {
        reads++;
        return receipts;
      });
      for (const r of receipts) state.add(r);
      const v = evaluate(state, resolvePin(state, registry, undefined), T0 + 60_000, { registry });
      const unknown = v.findings.filter((f) => f.code === 'unknown_agent');
      expect(unknown).toHaveLength(agents);
      expect(unknown.find((f) => f.agents[0] === 'unknown-1234')?.events).toEqual(['e1234']);
      if (versions) {
        const mismatch = v.findings.filter((f) => f.code === 'version_mismatch');
        expect(mismatch).toHaveLength(versions);
        expect(mismatch.find((f) => f.message.includes('"v7"'))?.events).toHaveLength(agents / versions);
      }
      expect(reads).toBeLessThanOrEqual(2);
    });
  }
});
