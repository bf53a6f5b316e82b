/**
 * Aggregation of admitted results without inventing consensus (source article, "Stage 4" and
 * "Failure trace: conflicting manuals").
 *
 * - Citations are grouped by source; identical citations (same source, edition and passage) are one
 *   citation with the provenance of every result that returned it.
 * - Citations of one source under different editions are a conflict (`conflicting_evidence`): all
 *   of them are kept with their provenance and the decision is `escalate` to the domain owner.
 *   Nothing is voted away: how many results cite an edition never decides between editions.
 * - Complementary citations (different sources) are kept side by side.
 * The caller passes results that passed return admission; aggregation does not re-admit them.
 */
import type { Citation, HandoffResult } from './schema.js';

export interface Provenance {
  handoffId: string;
  attempt: number;
  target: string;
}

export interface AggregatedCitation {
  source: string;
  edition: string;
  passage: string;
  trust: string;
  provenance: Provenance[];
}

export interface EvidenceConflict {
  code: 'conflicting_evidence';
  source: string;
  editions: string[];
  provenance: Provenance[];
}

export interface Aggregation {
  decision: 'aggregate' | 'escalate';
  citations: AggregatedCitation[];
  conflicts: EvidenceConflict[];
}

const text = (v: string | undefined): string => v ?? '';
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const byProvenance = (a: Provenance, b: Provenance): number => cmp(a.handoffId, b.handoffId) || a.attempt - b.attempt || cmp(a.target, b.target);

function dedupeProvenance(ps: Provenance[]): Provenance[] {
  const seen = new Map(ps.map((p) => [`${p.handoffId}\u0000${p.attempt}\u0000${p.target}`, p]));
  return [...seen.values()].sort(byProvenance);
}

export function aggregateEvidence(results: readonly HandoffResult[]): Aggregation {
  const byCitation = new Map<string, AggregatedCitation>();
  for (const r of results) {
    if (r.outcome !== 'evidence') continue;
    const from: Provenance = { handoffId: r.handoffId, attempt: r.attempt, target: r.target };
    for (const c of r.citations ?? ([] as Citation[])) {
      const key = [c.source, c.edition, c.passage].map(text).join('\u0000');
      const entry = byCitation.get(key) ?? { source: text(c.source), edition: text(c.edition), passage: text(c.passage), trust: text(c.trust), provenance: [] };
      entry.provenance.push(from);
      byCitation.set(key, entry);
    }
  }
  const citations = [...byCitation.values()]
    .map((c) => ({ ...c, provenance: dedupeProvenance(c.provenance) }))
    .sort((a, b) => cmp(a.source, b.source) || cmp(a.edition, b.edition) || cmp(a.passage, b.passage));
  const bySource = new Map<string, AggregatedCitation[]>();
  for (const c of citations) bySource.set(c.source, [...(bySource.get(c.source) ?? []), c]);
  const conflicts: EvidenceConflict[] = [];
  for (const [source, cs] of bySource) {
    const editions = [...new Set(cs.map((c) => c.edition))].sort();
    if (editions.length < 2) continue;
    conflicts.push({ code: 'conflicting_evidence', source, editions, provenance: dedupeProvenance(cs.flatMap((c) => c.provenance)) });
  }
  return { decision: conflicts.length > 0 ? 'escalate' : 'aggregate', citations, conflicts };
}
