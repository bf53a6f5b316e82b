/** The byte-level allow-list matcher agrees with isKeptAttributeKey, the allow-list's definition. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { agentLikeKeyAt, keptKeyAt } from '../src/otlp/keys.js';
import { isKeptAttributeKey, KEPT_ATTRIBUTE_KEYS, KEPT_ATTRIBUTE_PREFIXES, TOPOLOGY_ATTRIBUTE_KEYS } from '../src/otlp/types.js';

const utf8 = new TextEncoder();

/** Runs the matcher on the key's bytes placed inside a larger buffer, as they are in a message. */
function matchInBuffer(key: string, before = 3, after = 5): string | null {
  const bytes = utf8.encode(key);
  const buf = new Uint8Array(before + bytes.length + after).fill(0x74); // 't' around it
  buf.set(bytes, before);
  return keptKeyAt(buf, before, bytes.length);
}

const ALLOWED = [...KEPT_ATTRIBUTE_KEYS, ...KEPT_ATTRIBUTE_PREFIXES];

describe('keptKeyAt', () => {
  it('keeps every listed key and prefixed key, returning the key itself', () => {
    for (const key of KEPT_ATTRIBUTE_KEYS) expect(matchInBuffer(key)).toBe(key);
    expect(KEPT_ATTRIBUTE_PREFIXES).toEqual([]);
    for (const key of TOPOLOGY_ATTRIBUTE_KEYS) expect(matchInBuffer(key)).toBe(key);
  });

  it('keeps topology.* keys by exact name only: an invented topology key is content and is dropped', () => {
    for (const key of ['topology.note', 'topology.', 'topology.run.idx', 'topology.run.id.', 'topology.ü', 'topology.x', 'service.name']) {
      expect(matchInBuffer(key)).toBeNull();
      expect(isKeptAttributeKey(key)).toBe(false);
    }
  });

  it('drops content keys and near misses', () => {
    for (const key of ['gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.tool.call.arguments', 'gen_ai.agent.nam', 'gen_ai.agent.names', 'Service.name', 'topology', 'topologyx', '', 'service.name\u0000']) {
      expect(matchInBuffer(key)).toBeNull();
    }
  });

  it('agrees with isKeptAttributeKey on arbitrary and mutated keys', () => {
    const mutated = fc
      .tuple(fc.constantFrom(...ALLOWED), fc.nat(40), fc.nat(3), fc.string({ maxLength: 3, unit: 'binary' }))
      .map(([key, at, drop, insert]) => key.slice(0, at) + insert + key.slice(at + drop));
    const prefixed = fc.tuple(fc.constantFrom(...ALLOWED), fc.string({ maxLength: 12, unit: 'binary' })).map(([a, b]) => a + b);
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 40, unit: 'binary' }), mutated, prefixed), (key) => {
        expect(matchInBuffer(key)).toBe(isKeptAttributeKey(key) ? key : null);
      }),
      { numRuns: 3000 },
    );
  });
});

/** The definition agentLikeKeyAt was first written as: every word tried at every position (case folded by | 0x20). */
const AGENT_WORDS = ['agent', 'crew', 'handoff', 'graph', 'workflow', 'swarm', 'delegat', 'team'].map((w) => utf8.encode(w));
function agentLikeModel(buf: Uint8Array, start: number, length: number): string | null {
  if (length === 0 || length > 64) return null;
  const found = AGENT_WORDS.some((w) => {
    for (let i = start; i + w.length <= start + length; i++) if (w.every((c, k) => (buf[i + k] | 0x20) === c)) return true;
    return false;
  });
  if (!found) return null;
  const key = new TextDecoder().decode(buf.subarray(start, start + length));
  return /^[A-Za-z0-9_.:-]{1,64}$/.test(key) ? key : null;
}

describe('agentLikeKeyAt', () => {
  it('agrees with the word-by-word definition, words cut at the key\'s end included', () => {
    const word = fc.constantFrom('agent', 'AGENT', 'Crew', 'handoff', 'graph', 'workflow', 'swarm', 'delegat', 'team', 'tea', 'agen', 'gen_ai.', 'Agent@', 'teaM');
    const keyish = fc.array(fc.oneof(word, fc.string({ maxLength: 6, unit: 'binary' }), fc.constantFrom('.', '_', '-', ':', 'A', '\u00e9')), { maxLength: 14 }).map((p) => p.join(''));
    fc.assert(
      fc.property(keyish, fc.nat(4), fc.constantFrom(0x61, 0x74, 0x20, 0xff), (key, before, fill) => {
        const bytes = utf8.encode(key);
        const buf = new Uint8Array(before + bytes.length + 7).fill(fill); // bytes around it must never count
        buf.set(bytes, before);
        expect(agentLikeKeyAt(buf, before, bytes.length)).toBe(agentLikeModel(buf, before, bytes.length));
      }),
      { numRuns: 3000 },
    );
    const at = (k: string) => agentLikeKeyAt(utf8.encode(k), 0, utf8.encode(k).length);
    expect(at('crewai.agent.role')).toBe('crewai.agent.role');
    expect(at('llm.input_messages.0.message.content')).toBeNull();
    expect(at('my.TEAM')).toBe('my.TEAM');
    expect(at('my.tea')).toBeNull();
    expect(at('agent name')).toBeNull(); // not a key's charset
  });
});
