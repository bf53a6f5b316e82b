/**
 * The authority diff (article section 3, "Write an authority diff"): identities, tenants, resources,
 * capabilities, expiry and effect budgets, field by field. Authority only narrows: an existing identity
 * may not gain anything, an added identity must be delegated by a handoff and stay inside its parent's
 * envelope, and a read-only slice carries no effect capability or effect budget.
 * Codes reuse the handoff admission codes of interfaces.md where they mean the same thing.
 */
import { DURATION_PATTERN, type ArmConfig, type Budgets, type Envelope, type HandoffSpec, type Manifest } from './manifest.js';

export interface SetDelta {
  added: string[];
  removed: string[];
}

export interface Change<T> {
  baseline?: T;
  candidate?: T;
}

export interface IdentityDiff {
  identity: string;
  status: 'added' | 'removed' | 'changed' | 'unchanged';
  /** For an added identity: the source agent of the handoff(s) that delegate to it. */
  delegatedBy?: string[];
  tenants: SetDelta;
  resources: SetDelta;
  capabilities: SetDelta;
  expiresAfter: Change<string>;
  budgets: { actions: Change<number>; contextUnits: Change<number>; effects: Change<number> };
}

export type AuthorityCode =
  | 'tenant_widened'
  | 'resource_widened'
  | 'capability_widened'
  | 'expiry_widened'
  | 'budget_widened'
  | 'identity_without_delegation'
  | 'tenant_outside_parent'
  | 'resource_outside_parent'
  | 'capability_not_in_parent'
  | 'expiry_beyond_parent'
  | 'budget_exceeds_parent'
  | 'lease_beyond_delegation'
  | 'effects_in_read_slice'
  | 'final_owner_changed';

export interface AuthorityFinding {
  code: AuthorityCode;
  /** Field path inside the candidate's `config`. */
  path: string;
  message: string;
}

export interface AuthorityDiff {
  identities: IdentityDiff[];
  widening: AuthorityFinding[];
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
export function durationMs(d: string): number {
  const m = DURATION_PATTERN.exec(d);
  if (!m) throw new Error(`bad duration ${d}`);
  return Number(m[1]) * UNIT_MS[m[2]];
}

const setDelta = (a: readonly string[], b: readonly string[]): SetDelta => ({
  added: b.filter((x) => !a.includes(x)),
  removed: a.filter((x) => !b.includes(x)),
});
const BUDGET_KEYS = ['actions', 'contextUnits', 'effects'] as const;

function identityDiff(id: string, a: Envelope | undefined, b: Envelope | undefined, delegatedBy: string[]): IdentityDiff {
  const budgets = Object.fromEntries(
    BUDGET_KEYS.map((k) => [k, { ...(a ? { baseline: a.budgets[k] } : {}), ...(b ? { candidate: b.budgets[k] } : {}) }]),
  ) as IdentityDiff['budgets'];
  const d: IdentityDiff = {
    identity: id,
    status: !a ? 'added' : !b ? 'removed' : 'unchanged',
    tenants: setDelta(a?.tenants ?? [], b?.tenants ?? []),
    resources: setDelta(a?.resources ?? [], b?.resources ?? []),
    capabilities: setDelta(a?.capabilities ?? [], b?.capabilities ?? []),
    expiresAfter: { ...(a ? { baseline: a.expiresAfter } : {}), ...(b ? { candidate: b.expiresAfter } : {}) },
    budgets,
  };
  if (!a) d.delegatedBy = delegatedBy;
  if (a && b) {
    const moved =
      [d.tenants, d.resources, d.capabilities].some((s) => s.added.length + s.removed.length > 0) ||
      a.expiresAfter !== b.expiresAfter ||
      BUDGET_KEYS.some((k) => a.budgets[k] !== b.budgets[k]);
    if (moved) d.status = 'changed';
  }
  return d;
}

/** An existing identity may not gain tenants, resources, capabilities, lifetime or budget. */
function wideningOfExisting(id: string, a: Envelope, b: Envelope): AuthorityFinding[] {
  const out: AuthorityFinding[] = [];
  const base = `authority.${id}`;
  for (const t of setDelta(a.tenants, b.tenants).added)
    out.push({ code: 'tenant_widened', path: `${base}.tenants[${t}]`, message: `${id} gains tenant ${t}` });
  for (const r of setDelta(a.resources, b.resources).added)
    out.push({ code: 'resource_widened', path: `${base}.resources[${r}]`, message: `${id} gains resource ${r}` });
  for (const c of setDelta(a.capabilities, b.capabilities).added)
    out.push({ code: 'capability_widened', path: `${base}.capabilities[${c}]`, message: `${id} gains capability ${c}` });
  if (durationMs(b.expiresAfter) > durationMs(a.expiresAfter))
    out.push({ code: 'expiry_widened', path: `${base}.expiresAfter`, message: `${id} authority lives ${b.expiresAfter}, was ${a.expiresAfter}` });
  for (const k of BUDGET_KEYS)
    if (b.budgets[k] > a.budgets[k])
      out.push({ code: 'budget_widened', path: `${base}.budgets.${k}`, message: `${id} ${k} budget ${b.budgets[k]}, was ${a.budgets[k]}` });
  return out;
}

function effectCapabilities(config: ArmConfig, caps: readonly string[]): string[] {
  return caps.filter((c) => config.capabilities[c] === 'effect');
}

/** An added identity is a child envelope: inside its delegating parent's, and read-only in a read slice. */
function wideningOfAdded(id: string, env: Envelope, parents: string[], config: ArmConfig, readSlice: boolean): AuthorityFinding[] {
  const out: AuthorityFinding[] = [];
  const base = `authority.${id}`;
  if (parents.length === 0)
    out.push({ code: 'identity_without_delegation', path: base, message: `${id} is a new identity that no handoff delegates to` });
  for (const p of parents) {
    const parent = config.authority[p];
    if (!parent) continue;
    for (const t of env.tenants)
      if (!parent.tenants.includes(t))
        out.push({ code: 'tenant_outside_parent', path: `${base}.tenants[${t}]`, message: `${id} holds tenant ${t}, which ${p} does not` });
    for (const r of env.resources)
      if (!parent.resources.includes(r))
        out.push({ code: 'resource_outside_parent', path: `${base}.resources[${r}]`, message: `${id} holds resource ${r}, which ${p} does not` });
    for (const c of env.capabilities)
      if (!parent.capabilities.includes(c))
        out.push({ code: 'capability_not_in_parent', path: `${base}.capabilities[${c}]`, message: `${id} holds capability ${c}, which ${p} does not` });
    if (durationMs(env.expiresAfter) > durationMs(parent.expiresAfter))
      out.push({ code: 'expiry_beyond_parent', path: `${base}.expiresAfter`, message: `${id} lives ${env.expiresAfter}, beyond ${p}'s ${parent.expiresAfter}` });
    for (const k of BUDGET_KEYS)
      if (env.budgets[k] > parent.budgets[k])
        out.push({ code: 'budget_exceeds_parent', path: `${base}.budgets.${k}`, message: `${id} ${k} budget ${env.budgets[k]} exceeds ${p}'s ${parent.budgets[k]}` });
  }
  if (readSlice) {
    for (const c of effectCapabilities(config, env.capabilities))
      out.push({ code: 'effects_in_read_slice', path: `${base}.capabilities[${c}]`, message: `${id} holds effect capability ${c} in a read-only slice` });
    if (env.budgets.effects > 0)
      out.push({ code: 'effects_in_read_slice', path: `${base}.budgets.effects`, message: `${id} holds an effect budget of ${env.budgets.effects} in a read-only slice` });
  }
  return out;
}

/** A new or changed handoff stays inside its source's authority and the root budget, and names the one final owner. */
function wideningOfHandoff(h: HandoffSpec, config: ArmConfig, readSlice: boolean): AuthorityFinding[] {
  const out: AuthorityFinding[] = [];
  const base = `topology.handoffs[${h.id}]`;
  const source = config.authority[h.source];
  const target = config.authority[h.target];
  for (const c of h.allowedCapabilities)
    if (source && !source.capabilities.includes(c))
      out.push({ code: 'capability_not_in_parent', path: `${base}.allowedCapabilities[${c}]`, message: `handoff ${h.id} grants ${c}, which ${h.source} does not hold` });
  for (const k of BUDGET_KEYS)
    if (h.budgets[k] > config.budgets[k])
      out.push({ code: 'budget_exceeds_parent', path: `${base}.budgets.${k}`, message: `handoff ${h.id} reserves ${k} ${h.budgets[k]}, beyond the root budget ${config.budgets[k]}` });
  const lease = durationMs(h.lease);
  for (const [who, env] of [[h.source, source], [h.target, target]] as const)
    if (env && lease > durationMs(env.expiresAfter))
      out.push({ code: 'lease_beyond_delegation', path: `${base}.lease`, message: `handoff ${h.id} lease ${h.lease} outlives ${who}'s authority (${env.expiresAfter})` });
  if (h.finalOwner !== config.topology.finalOwner)
    out.push({ code: 'final_owner_changed', path: `${base}.finalOwner`, message: `handoff ${h.id} names final owner ${h.finalOwner}, not ${config.topology.finalOwner}` });
  if (readSlice) {
    if (h.consequence === 'effect')
      out.push({ code: 'effects_in_read_slice', path: `${base}.consequence`, message: `handoff ${h.id} is an effect slice; the declared slice is read-only` });
    for (const c of effectCapabilities(config, h.allowedCapabilities))
      out.push({ code: 'effects_in_read_slice', path: `${base}.allowedCapabilities[${c}]`, message: `handoff ${h.id} grants effect capability ${c} in a read-only slice` });
    if (h.budgets.effects > 0)
      out.push({ code: 'effects_in_read_slice', path: `${base}.budgets.effects`, message: `handoff ${h.id} carries an effect budget of ${h.budgets.effects} in a read-only slice` });
  }
  return out;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export function diffAuthority(manifest: Manifest): AuthorityDiff {
  const a = manifest.baseline.config;
  const b = manifest.candidate.config;
  const readSlice = manifest.changedSlice.consequence === 'read';
  const ids = [...Object.keys(a.authority), ...Object.keys(b.authority).filter((k) => !(k in a.authority))];
  const delegators = (id: string) => [...new Set(b.topology.handoffs.filter((h) => h.target === id).map((h) => h.source))];
  const identities = ids.map((id) => identityDiff(id, a.authority[id], b.authority[id], delegators(id)));
  const widening: AuthorityFinding[] = [];
  for (const id of ids) {
    const ea = a.authority[id];
    const eb = b.authority[id];
    if (ea && eb) widening.push(...wideningOfExisting(id, ea, eb));
    else if (eb) widening.push(...wideningOfAdded(id, eb, delegators(id), b, readSlice));
  }
  for (const h of b.topology.handoffs) {
    const before = a.topology.handoffs.find((x) => x.id === h.id);
    if (!before || !same(before, h)) widening.push(...wideningOfHandoff(h, b, readSlice));
  }
  if (a.topology.finalOwner !== b.topology.finalOwner)
    widening.push({
      code: 'final_owner_changed',
      path: 'topology.finalOwner',
      message: `the final owner moves from ${a.topology.finalOwner} to ${b.topology.finalOwner}`,
    });
  return { identities, widening };
}

export type { Budgets };
