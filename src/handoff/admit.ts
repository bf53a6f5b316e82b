/**
 * Handoff admission: every predicate of the contract is checked against the parent envelope and the
 * authoritative state, and every failed one is returned as a typed denial (interfaces.md codes).
 * Pure and deterministic: the denials depend only on the three documents, never on a clock or on
 * the order of `activeLeases`.
 */
import type { Budgets, Handoff, HandoffStateDoc, ParentEnvelope } from './schema.js';
import { compareTimes, sameStateVersion } from './schema.js';

export const ADMISSION_CODES = [
  'unknown_agent',
  'missing_final_owner',
  'missing_owner_during_slice',
  'capability_not_in_parent',
  'tenant_outside_parent',
  'resource_outside_parent',
  'expiry_beyond_parent',
  'lease_beyond_delegation',
  'budget_exceeds_parent',
  'effects_in_read_slice',
  'missing_cancel_ref',
  'missing_timeout_disposition',
  'missing_completion',
  'stale_state_version',
  'duplicate_active',
  'parent_cancelled',
] as const;
export type AdmissionCode = (typeof ADMISSION_CODES)[number];

export interface Denial<C extends string = string> {
  code: C;
  /** Path of the field at fault in the document under admission, e.g. `budgets.effects`. */
  field: string;
  /** One content-free line: identities, names, times and counts only. */
  message: string;
}

export type Admission<C extends string = string> = { admitted: true } | { admitted: false; denials: Denial<C>[] };

export const BUDGET_KEYS = ['actions', 'contextUnits', 'effects'] as const satisfies readonly (keyof Budgets)[];

/** Blank or absent: a required accountability field that names nothing. */
export const isMissing = (v: string | undefined): boolean => v === undefined || v.trim() === '';

/**
 * Denials come in check order (identity, accountability, scope, time, budget, effects, state,
 * duplicates, cancellation), each check in document order: a pure function of the documents.
 */
export function verdictOf<C extends string>(denials: Denial<C>[]): Admission<C> {
  return denials.length === 0 ? { admitted: true } : { admitted: false, denials };
}

type Check = (h: Handoff, parent: ParentEnvelope, state: HandoffStateDoc) => Denial<AdmissionCode>[];

/** Every agent the handoff names must be a known identity of the parent envelope. */
export const knownAgents: Check = (h, parent) => {
  const known = new Set([parent.agent, ...parent.agents]);
  const named: [string, string | undefined][] = [
    ['source', h.source],
    ['target', h.target],
    ['ownerDuringSlice', h.ownerDuringSlice],
    ['finalOwner', h.finalOwner],
  ];
  const out: Denial<AdmissionCode>[] = [];
  for (const [field, agent] of named) {
    if (isMissing(agent) || known.has(agent as string)) continue;
    out.push({ code: 'unknown_agent', field, message: `${field} '${agent}' is not a known agent of the parent envelope` });
  }
  // The envelope is the source's authority: another agent cannot delegate under it.
  if (h.source !== parent.agent && known.has(h.source)) {
    out.push({
      code: 'unknown_agent',
      field: 'source',
      message: `source '${h.source}' is not the envelope's agent '${parent.agent}': the envelope grants it no authority to delegate`,
    });
  }
  return out;
};

/** Ownership and protocol fields that must name something. */
export const accountability: Check = (h) => {
  const required: [keyof Handoff, AdmissionCode, string][] = [
    ['finalOwner', 'missing_final_owner', 'no final accountable owner: the branch would be orphaned'],
    ['ownerDuringSlice', 'missing_owner_during_slice', 'no owner during the slice'],
    ['cancelRef', 'missing_cancel_ref', 'no cancellation reference: cancellation cannot propagate'],
    ['onTimeout', 'missing_timeout_disposition', 'no timeout disposition: nobody is responsible when the lease ends'],
    ['completeWhen', 'missing_completion', 'no completion predicate: the return cannot be tested'],
  ];
  return required
    .filter(([field]) => isMissing(h[field] as string | undefined))
    .map(([field, code, message]) => ({ code, field, message }));
};

/** Authority only narrows: capabilities, tenant and resource must be the parent's. */
export const narrowScope: Check = (h, parent) => {
  const out: Denial<AdmissionCode>[] = [];
  h.allowedCapabilities.forEach((cap, i) => {
    if (!Object.hasOwn(parent.capabilities, cap)) {
      out.push({ code: 'capability_not_in_parent', field: `allowedCapabilities[${i}]`, message: `capability '${cap}' is not held by the parent envelope` });
    }
  });
  if (!parent.tenants.includes(h.delegation.tenant)) {
    out.push({ code: 'tenant_outside_parent', field: 'delegation.tenant', message: `tenant '${h.delegation.tenant}' is outside the parent's tenants` });
  }
  if (!parent.resources.includes(h.delegation.resource)) {
    out.push({ code: 'resource_outside_parent', field: 'delegation.resource', message: `resource '${h.delegation.resource}' is outside the parent's resources` });
  }
  return out;
};

/**
 * Time narrows too. The parent's authority window is (now, parent.expiresAt]: a delegation that
 * ends after the parent's expiry, or has already ended at `now`, is outside it
 * (`expiry_beyond_parent`); the lease must end at or before the delegation.
 */
export const narrowTime: Check = (h, parent, state) => {
  const out: Denial<AdmissionCode>[] = [];
  const delegationEnd = h.delegation.expiresAt;
  if (compareTimes(delegationEnd, parent.expiresAt) > 0) {
    out.push({ code: 'expiry_beyond_parent', field: 'delegation.expiresAt', message: `delegation expires at ${h.delegation.expiresAt}, after the parent's ${parent.expiresAt}` });
  } else if (compareTimes(delegationEnd, state.now) <= 0) {
    out.push({ code: 'expiry_beyond_parent', field: 'delegation.expiresAt', message: `delegation expired at ${h.delegation.expiresAt}, not after now ${state.now}: an expired delegation grants nothing` });
  }
  if (compareTimes(h.leaseExpiresAt, delegationEnd) > 0) {
    out.push({ code: 'lease_beyond_delegation', field: 'leaseExpiresAt', message: `lease expires at ${h.leaseExpiresAt}, after the delegation's ${h.delegation.expiresAt}` });
  }
  return out;
};

/** Child budgets are reservations inside what the parent still has unreserved. */
export const budgetWithinParent: Check = (h, parent) =>
  BUDGET_KEYS.filter((k) => h.budgets[k] > parent.budgets[k]).map((k) => ({
    code: 'budget_exceeds_parent' as const,
    field: `budgets.${k}`,
    message: `${k} budget ${h.budgets[k]} exceeds the parent's unreserved ${parent.budgets[k]}`,
  }));

/**
 * A `read` slice carries no effect budget and no effect capability. A capability the parent does not
 * hold has no known consequence class, so it is treated as an effect (fail closed).
 */
export const readSliceHasNoEffects: Check = (h, parent) => {
  if (h.consequence !== 'read') return [];
  const out: Denial<AdmissionCode>[] = [];
  if (h.budgets.effects > 0) {
    out.push({ code: 'effects_in_read_slice', field: 'budgets.effects', message: `a read slice has an effect budget of ${h.budgets.effects}` });
  }
  h.allowedCapabilities.forEach((cap, i) => {
    const kind = Object.hasOwn(parent.capabilities, cap) ? parent.capabilities[cap] : undefined;
    if (kind === 'read') return;
    out.push({
      code: 'effects_in_read_slice',
      field: `allowedCapabilities[${i}]`,
      message: kind === 'effect'
        ? `a read slice is granted the effect capability '${cap}'`
        : `a read slice is granted '${cap}', whose consequence the parent does not vouch for (treated as an effect)`,
    });
  });
  return out;
};

/** The contract must be built from the current authoritative state. */
export const currentState: Check = (h, _parent, state) =>
  sameStateVersion(h.stateRef.version, state.stateVersion)
    ? []
    : [{ code: 'stale_state_version', field: 'stateRef.version', message: `handoff built on state version ${h.stateRef.version}; current is ${state.stateVersion}` }];

/**
 * One logical work key has at most one active lease: an unexpired lease (expiry after `now`; a lease
 * ending exactly at `now` has ended) of another handoff or attempt on the same key refuses admission.
 * The same handoff and attempt re-presented is not a duplicate of itself.
 */
export const noDuplicateActive: Check = (h, _parent, state) => {
  const holders = state.activeLeases
    .filter((l) => l.duplicateKey === h.duplicateKey)
    .filter((l) => compareTimes(l.leaseExpiresAt, state.now) > 0)
    .filter((l) => !(l.handoffId === h.handoffId && l.attempt === h.attempt))
    .map((l) => `${l.handoffId}#${l.attempt} until ${l.leaseExpiresAt}`)
    .sort();
  return holders.length === 0
    ? []
    : [{ code: 'duplicate_active', field: 'duplicateKey', message: `work key '${h.duplicateKey}' has an active lease: ${holders.join(', ')}` }];
};

/** Cancellation prevents new dispatch. */
export const parentNotCancelled: Check = (_h, _parent, state) =>
  state.cancelled
    ? [{ code: 'parent_cancelled', field: 'cancelRef', message: `the parent was cancelled${state.cancelledAt ? ` at ${state.cancelledAt}` : ''}: no new dispatch` }]
    : [];

export const ADMISSION_CHECKS: readonly Check[] = [
  knownAgents,
  accountability,
  narrowScope,
  narrowTime,
  budgetWithinParent,
  readSliceHasNoEffects,
  currentState,
  noDuplicateActive,
  parentNotCancelled,
];

export function admitHandoff(h: Handoff, parent: ParentEnvelope, state: HandoffStateDoc): Admission<AdmissionCode> {
  return verdictOf(ADMISSION_CHECKS.flatMap((check) => check(h, parent, state)));
}
