/**
 * LangGraph.js's functional API and nested graphs (a supervisor graph inside a node) through OpenInference's LangChain
 * instrumentation, to a real `topology-audit serve` child: edges from evidence only. In a file of their own (a fresh
 * test process): run in one process after the other LangChain apps of test/frameworks.test.ts, the nested graph's node
 * spans overlapped in time about one run in two (a gap, the run uncertain), a state of the LangChain side.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getJson, startServerProcess, type ServerProcess } from './helpers/server.js';
import { CONTENT_MARKER as LG_MARKER, instrumentLangChain, runFunctionalSupervisor, runHierarchicalTeams } from './fixtures/frameworks/langgraph.js';
import { allBytes, contractsDir, edgesOf, expectNothingUnmapped, newRuns, otlpProvider } from './helpers/framework-apps.js';
import { delegateAndReturn } from './helpers/framework-runs.js';

describe('LangGraph.js functional API and nested graphs: edges from evidence only', () => {
  let sup: ServerProcess;
  let teams: ServerProcess;
  const seenSup = new Set<string>();
  const seenTeams = new Set<string>();
  beforeAll(async () => {
    const dir = contractsDir();
    [sup, teams] = await Promise.all([
      startServerProcess({ contracts: dir, args: ['--contract', 'supervisor-workers', '--parent-wait', '2s'] }),
      startServerProcess({ contracts: dir, args: ['--contract', 'teams', '--parent-wait', '2s'] }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([sup?.stop(), teams?.stop()]);
  });

  it('an entrypoint calling a task per agent: supervisor -> each worker and back, never a handoff between siblings; a call to publisher is forbidden_edge', async () => {
    const provider = otlpProvider(sup);
    instrumentLangChain(provider);
    await runFunctionalSupervisor({ calls: ['researcher', 'writer'] });
    await provider.forceFlush();
    const [ok] = await newRuns(sup, seenSup, 1, (v) => v[0] === 'healthy');
    expect(await edgesOf(sup, ok.run)).toEqual(delegateAndReturn('supervisor', ['researcher', 'writer']));
    await runFunctionalSupervisor({ calls: ['researcher', 'publisher'] });
    await provider.forceFlush();
    const [bad] = await newRuns(sup, seenSup, 1, (v) => v[0] === 'forbidden_edge');
    const edges = await edgesOf(sup, bad.run);
    expect(edges).toEqual(['supervisor -> researcher : delegate', 'researcher -> supervisor : return', 'supervisor -> publisher : delegate', 'publisher -> supervisor : return']);
    expect(edges.some((e) => e.includes(': handoff'))).toBe(false);
    const { body } = await getJson<{ findings: { verdict: string; edge: string }[] }>(`${sup.api}/api/v1/runs/${bad.run}`);
    expect(body.findings.filter((f) => f.verdict === 'forbidden_edge').map((f) => f.edge)).toContain('supervisor -> publisher : delegate');
    expect(allBytes(sup.dataDir).includes(Buffer.from(LG_MARKER))).toBe(false);
    await provider.shutdown();
  }, 60_000);

  it('hierarchical teams (a supervisor graph inside a node): inner routes are the inner agents\' edges under the team node; healthy, then forbidden_edge naming the inner route', async () => {
    const provider = otlpProvider(teams);
    instrumentLangChain(provider);
    const topScript = [{ tool: 'transfer_to_research_team' }, { tool: 'transfer_to_writing_team' }, { text: `done ${LG_MARKER}` }];
    await runHierarchicalTeams({ topScript, researchLeadScript: [{ tool: 'transfer_to_researcher' }, { text: 'ok' }], writingLeadScript: [{ tool: 'transfer_to_writer' }, { text: 'ok' }] });
    await provider.forceFlush();
    const [ok] = await newRuns(teams, seenTeams, 1, (v) => v[0] === 'healthy');
    expect((await edgesOf(teams, ok.run)).sort()).toEqual(
      [
        'supervisor -> research_team : delegate',
        'research_team -> research_lead : delegate',
        'research_lead -> researcher : delegate',
        'researcher -> research_lead : return',
        'research_lead -> research_team : return',
        'research_team -> supervisor : return',
        'supervisor -> writing_team : delegate',
        'writing_team -> writing_lead : delegate',
        'writing_lead -> writer : delegate',
        'writer -> writing_lead : return',
        'writing_lead -> writing_team : return',
        'writing_team -> supervisor : return',
      ].sort(),
    );
    await runHierarchicalTeams({ topScript, researchLeadScript: [{ tool: 'transfer_to_researcher' }, { text: 'ok' }], writingLeadScript: [{ tool: 'transfer_to_publisher' }, { text: 'ok' }] });
    await provider.forceFlush();
    const [bad] = await newRuns(teams, seenTeams, 1, (v) => v.length === 1 && v[0] !== 'waiting');
    expect(bad.verdict).toBe('forbidden_edge');
    const edges = await edgesOf(teams, bad.run);
    expect(edges).toContain('writing_lead -> publisher : delegate');
    expect(edges.filter((e) => !e.includes(' -> '))).toEqual([]); // no gap: every inner route was read
    const { body } = await getJson<{ findings: { verdict: string; edge: string }[] }>(`${teams.api}/api/v1/runs/${bad.run}`);
    expect(body.findings.filter((f) => f.verdict === 'forbidden_edge').map((f) => f.edge).sort()).toEqual(['publisher -> writing_lead : return', 'writing_lead -> publisher : delegate']);
    expect(allBytes(teams.dataDir).includes(Buffer.from(LG_MARKER))).toBe(false);
    await provider.shutdown();
  }, 60_000);

  it('no false alarm: the functional-API and nested-graph traces that gave receipts are never listed as unmapped nor counted', async () => {
    await expectNothingUnmapped(sup, 2);
    await expectNothingUnmapped(teams, 2);
  }, 60_000);
});
