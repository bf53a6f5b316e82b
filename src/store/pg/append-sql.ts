/** The statement that writes a group of appends in the shared store (the fast path and the decided path). */

/**
 * The one statement that stores a group's receipt rows ($1-$7: run, event, variant, body, source, received_at, part,
 * one typed array each, inserted in order, ON CONFLICT DO NOTHING), touches `runs` for the rows that went in (in run
 * order, as setVerdictStates, so the two never wait on each other's row locks in a cycle; a run whose first_at and
 * updated_at would not change is left as it is) and inserts the span log entries ($8-$12: trace_id, part, logged_at,
 * body, forwarded); $13 the instance, $14 its life; the first pins the appends carry ($15, JSON, in run order as
 * setPins; ON CONFLICT DO NOTHING: the first pin written wins) and their contracts' content ($16, JSON, by hash, first
 * write wins). `gate` is a condition evaluated before the first row goes in (the fast path takes the ordering lock
 * there: before a receipt or a pin row goes in); `inserted` computes the answer from `n`, the number of receipt rows
 * that went in; `pinned` lists the runs whose pin went in. Rows and span log entries come as typed arrays (unnest):
 * as one jsonb parameter, its parse (jsonb_in) was ~5% of PostgreSQL's CPU in the append (issue 35). The bodies ($4,
 * $11) are compact JSON, which holds no raw newline: `joined`, each column comes as one text of the bodies joined by
 * newlines (split by string_to_array; no escaping on either side); otherwise (a body with a newline: never one this
 * build writes) as a text[].
 */
export function writeRowsSql(gate: string, inserted: string, joined: boolean): string {
  const bodies = (n: number): string => (joined ? `string_to_array($${n}::text, E'\\n')` : `$${n}::text[]`);
  return `WITH ins AS (
     INSERT INTO receipts (run, event, variant, body, source, received_at, origin, part)
     SELECT e.run, e.event, e.variant, e.body, e.source, e.received_at, $13, e.part
     FROM unnest($1::text[], $2::text[], $3::int[], ${bodies(4)}, $5::text[], $6::bigint[], $7::int[])
       WITH ORDINALITY AS e(run, event, variant, body, source, received_at, part, ord)
     WHERE ${gate}
     ORDER BY e.ord
     ON CONFLICT (run, event, variant) DO NOTHING
     RETURNING run, part, received_at
   ), touched AS (
     INSERT INTO runs (run, part, first_at, updated_at)
     SELECT run, min(part), min(received_at), max(received_at) FROM ins GROUP BY run ORDER BY run
     ON CONFLICT (run) DO UPDATE SET first_at = LEAST(runs.first_at, excluded.first_at),
       updated_at = GREATEST(runs.updated_at, excluded.updated_at)
     WHERE runs.first_at > excluded.first_at OR runs.updated_at < excluded.updated_at
   ), spans AS (
     INSERT INTO span_log (trace_id, part, origin, logged_at, body, forwarded, life)
     SELECT s.trace_id, s.part, $13, s.logged_at, s.body, s.forwarded, $14
     FROM unnest($8::text[], $9::int[], $10::bigint[], ${bodies(11)}, $12::boolean[])
       WITH ORDINALITY AS s(trace_id, part, logged_at, body, forwarded, ord)
     ORDER BY s.ord
   ), pinned AS (
     INSERT INTO pins (run, contract, version, phase, contract_hash)
     SELECT p.v->>0, p.v->>1, p.v->>2, p.v->>3, p.v->>4
     FROM jsonb_array_elements($15::jsonb) WITH ORDINALITY AS p(v, ord)
     WHERE ${gate}
     ORDER BY p.ord
     ON CONFLICT (run) DO NOTHING
     RETURNING run
   ), pinned_contracts AS (
     INSERT INTO contracts (hash, contract, version, content)
     SELECT k.v->>0, k.v->>1, k.v->>2, k.v->>3
     FROM jsonb_array_elements($16::jsonb) WITH ORDINALITY AS k(v, ord)
     WHERE ${gate}
     ORDER BY k.ord
     ON CONFLICT (hash) DO NOTHING
   )
   SELECT ${inserted} AS inserted, (SELECT coalesce(json_agg(run), '[]'::json) FROM pinned) AS pinned
   FROM (SELECT count(*) AS n FROM ins) AS c`;
}
