/**
 * Agent identity and the same-invocation rule, shared by every dialect (docs/dialects.md "Identity"):
 * - an agent's identity is its id attribute (e.g. `gen_ai.agent.id`) unless, within one trace, spans with
 *   different names share that id (a framework's default id such as `agent`): then its name is the identity;
 * - two spans of the same agent, one beneath the other, are one invocation seen from two sides only when the
 *   upper one is a CLIENT span and the lower one is not (SERVER, INTERNAL or unspecified): an agent calling
 *   another instance of itself in-process is an edge.
 */

/** OTLP SpanKind CLIENT. */
const CLIENT = 3;

/** What identity needs of an agent span: its id, its other names (aliases), its span kind. */
export interface AgentIdentity {
  /** The id attribute's value (or the name, when the span has no id). */
  id: string;
  /** [id, ...aliases]: the name beside a distinct id is aliases[0]. */
  names: readonly string[];
  /** OTLP span kind, when known. */
  kind?: number;
}

/** The agent an identity stands for in its trace: its name when its id is shared by different names, else its id. */
export function identityOf(a: AgentIdentity, idShared: (id: string) => boolean): string {
  return a.names.length > 1 && idShared(a.id) ? a.names[1] : a.id;
}

/** True when the ids of `spans` include `id` under two or more different names (the id does not identify). */
export function isSharedId(id: string, spans: Iterable<AgentIdentity>): boolean {
  let seen: string | undefined;
  for (const s of spans) {
    if (s.id !== id || s.names.length < 2) continue;
    if (seen === undefined) seen = s.names[1];
    else if (seen !== s.names[1]) return true;
  }
  return false;
}

/**
 * The caller/callee pair of an agent span beneath another: `null` when they are one invocation seen from the
 * client and the server side (no edge), else the identities of both ends.
 */
export function callPair(caller: AgentIdentity, callee: AgentIdentity, idShared: (id: string) => boolean): { from: string; to: string } | null {
  const from = identityOf(caller, idShared);
  const to = identityOf(callee, idShared);
  const sameAgent = from === to || (!idShared(caller.id) && caller.names.some((n) => callee.names.includes(n)));
  if (sameAgent && caller.kind === CLIENT && callee.kind !== CLIENT) return null;
  return { from, to };
}
