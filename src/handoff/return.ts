/**
 * Return admission: the returned artifact is untrusted input. It is checked against the handoff that
 * was admitted and the parent's current authoritative state; every failed predicate is a typed
 * denial (interfaces.md codes). Pure and deterministic.
 *
 * Ordering with cancellation: a result is `late_after_cancel` when the cancellation committed at or
 * before `returnedAt` (cancelledAt <= returnedAt). Equal instants give no evidence that the result
 * committed first, and cancellation is the authoritative record, so a tie goes to the cancellation.
 * A cancelled state without `cancelledAt` cannot show that the result came first: it is refused too.
 */
import type { Handoff, HandoffResult, HandoffStateDoc } from './schema.js';
import { compareTimes, sameStateVersion } from './schema.js';
import { BUDGET_KEYS, isMissing, verdictOf } from './admit.js';
import type { Admission, Denial } from './admit.js';

export const RETURN_CODES = [
  'wrong_handoff',
  'wrong_attempt',
  'wrong_target',
  'stale_incompatible',
  'late',
  'late_after_cancel',
  'over_budget',
  'capability_outside_grant',
  'effect_in_read_slice',
  'missing_citations',
  'malformed_no_evidence',
] as const;
export type ReturnCode = (typeof RETURN_CODES)[number];

type Check = (r: HandoffResult, h: Handoff, state: HandoffStateDoc) => Denial<ReturnCode>[];

/**
 * The lease in force for this attempt: the registry's entry when present (it records renewals), else
 * the handoff's own. Should the registry hold several entries for the attempt, the latest expiry
 * counts, whatever their order.
 */
export function leaseInForce(h: Handoff, state: HandoffStateDoc): string {
  const entries = state.activeLeases.filter((l) => l.handoffId === h.handoffId && l.attempt === h.attempt);
  if (entries.length === 0) return h.leaseExpiresAt;
  return entries.reduce((a, b) => (compareTimes(b.leaseExpiresAt, a.leaseExpiresAt) > 0 ? b : a)).leaseExpiresAt;
}

/** Identity: the artifact must belong to this handoff, this attempt and this target. */
export const identity: Check = (r, h, state) => {
  const out: Denial<ReturnCode>[] = [];
  if (r.handoffId !== h.handoffId) {
    out.push({ code: 'wrong_handoff', field: 'handoffId', message: `result is for handoff '${r.handoffId}', not '${h.handoffId}'` });
  }
  if (r.attempt !== h.attempt) {
    out.push({ code: 'wrong_attempt', field: 'attempt', message: `result is for attempt ${r.attempt}, not ${h.attempt}` });
  } else {
    // The registry may have moved the work key to another attempt: this one no longer holds it.
    const holders = state.activeLeases
      .filter((l) => l.duplicateKey === h.duplicateKey && compareTimes(l.leaseExpiresAt, state.now) > 0)
      .filter((l) => !(l.handoffId === h.handoffId && l.attempt === h.attempt))
      .map((l) => `${l.handoffId}#${l.attempt}`)
      .sort();
    if (holders.length > 0) {
      out.push({ code: 'wrong_attempt', field: 'attempt', message: `work key '${h.duplicateKey}' is held by ${holders.join(', ')}, not by attempt ${h.attempt}` });
    }
  }
  if (r.target !== h.target) {
    out.push({ code: 'wrong_target', field: 'target', message: `result comes from '${r.target}', not the handoff's target '${h.target}'` });
  }
  return out;
};

/** The artifact must have observed the parent's current state version. */
export const current: Check = (r, _h, state) => {
  if (sameStateVersion(r.observedStateVersion, state.stateVersion)) return [];
  // State versions are opaque (compared as text, semantics 5): any version but the current one is refused, older
  // or one the parent never issued alike; its text says nothing about which.
  const message = `observed state version ${r.observedStateVersion} is not the current ${state.stateVersion}: revalidate against the current state`;
  return [{ code: 'stale_incompatible', field: 'observedStateVersion', message }];
};

/** Lease: a return exactly at expiry is on time; after it, the result is diagnostic only. */
export const withinLease: Check = (r, h, state) => {
  const lease = leaseInForce(h, state);
  return compareTimes(r.returnedAt, lease) > 0
    ? [{ code: 'late', field: 'returnedAt', message: `returned at ${r.returnedAt}, after the lease expired at ${lease}` }]
    : [];
};

/** Cancellation committed first (ties go to the cancellation): the result is diagnostic only. */
export const beforeCancel: Check = (r, _h, state) => {
  if (!state.cancelled) return [];
  if (state.cancelledAt !== undefined && compareTimes(state.cancelledAt, r.returnedAt) > 0) return [];
  const when = state.cancelledAt ? `cancelled at ${state.cancelledAt}, at or before the return at ${r.returnedAt}` : 'cancelled with no recorded time: the result cannot be shown to come first';
  return [{ code: 'late_after_cancel', field: 'returnedAt', message: `parent ${when}` }];
};

export const withinBudget: Check = (r, h) =>
  BUDGET_KEYS.filter((k) => r.usage[k] > h.budgets[k]).map((k) => ({
    code: 'over_budget' as const,
    field: `usage.${k}`,
    message: `used ${k} ${r.usage[k]}, over the granted ${h.budgets[k]}`,
  }));

export const withinGrant: Check = (r, h) => {
  const granted = new Set(h.allowedCapabilities);
  const out: Denial<ReturnCode>[] = [];
  r.capabilitiesUsed.forEach((cap, i) => {
    if (!granted.has(cap)) out.push({ code: 'capability_outside_grant', field: `capabilitiesUsed[${i}]`, message: `used capability '${cap}', which the handoff did not grant` });
  });
  return out;
};

export const noEffectInReadSlice: Check = (r, h) =>
  h.consequence === 'read' && r.usage.effects > 0
    ? [{ code: 'effect_in_read_slice', field: 'usage.effects', message: `a read slice reports ${r.usage.effects} effect(s)` }]
    : [];

const CITATION_FIELDS = ['source', 'edition', 'passage', 'trust'] as const;

/** Evidence is cited passages: at least one, each with source, edition, passage and trust label. */
export const cited: Check = (r) => {
  if (r.outcome !== 'evidence') return [];
  const citations = r.citations ?? [];
  if (citations.length === 0) {
    return [{ code: 'missing_citations', field: 'citations', message: 'an evidence outcome with no citations' }];
  }
  const out: Denial<ReturnCode>[] = [];
  citations.forEach((c, i) => {
    for (const f of CITATION_FIELDS) {
      if (isMissing(c[f])) out.push({ code: 'missing_citations', field: `citations[${i}].${f}`, message: `citation ${i} has no ${f}` });
    }
  });
  return out;
};

const NO_EVIDENCE_FIELDS = ['corpus', 'version', 'scope', 'stopReason', 'limitations'] as const;

const blank = (v: string | number | string[] | undefined): boolean =>
  v === undefined || (typeof v === 'string' && v.trim() === '') || (Array.isArray(v) && v.every((s) => s.trim() === ''));

/** An explicit no-evidence result names what was searched, how far and with what limits. */
export const explicitNoEvidence: Check = (r) => {
  if (r.outcome !== 'no_evidence') return [];
  if (r.noEvidence === undefined) {
    return [{ code: 'malformed_no_evidence', field: 'noEvidence', message: 'a no-evidence outcome without corpus, version, scope, stop reason and limitations' }];
  }
  const ne = r.noEvidence;
  return NO_EVIDENCE_FIELDS.filter((f) => blank(ne[f])).map((f) => ({
    code: 'malformed_no_evidence' as const,
    field: `noEvidence.${f}`,
    message: `no-evidence result does not state its ${f}`,
  }));
};

export const RETURN_CHECKS: readonly Check[] = [
  identity,
  current,
  withinLease,
  beforeCancel,
  withinBudget,
  withinGrant,
  noEffectInReadSlice,
  cited,
  explicitNoEvidence,
];

export function admitReturn(result: HandoffResult, handoff: Handoff, state: HandoffStateDoc): Admission<ReturnCode> {
  return verdictOf(RETURN_CHECKS.flatMap((check) => check(result, handoff, state)));
}
