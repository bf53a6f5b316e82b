/**
 * The run list: newest first, filtered by verdict, contract and alert state (kept in the URL), updated live. It answers
 * "since when": absolute start times with dates (UTC, local on hover), when each run entered its verdict, and
 * whether it is alerting, acknowledged or silenced.
 * The page's markup is built by the functions below (listElements, runRow, runsBody, verdictChips); listPage keeps the
 * state (filters, cursor, live updates) and the closures that keep the markup current.
 */
import type { RunList, RunRow } from '../view.js';
import type { Ctx, View } from './page.js';
import { agoEl, coalesce, contractHref, getJson, h, naiveBadge, runHref, verdictBadge, whenEl } from './dom.js';

/** The alert-state filter: its URL value, its label and the API flags it sets. */
const STATES: [string, string, Record<string, string>][] = [
  ['', 'Any state', {}],
  ['alerting', 'Alerting', { alerting: 'true' }],
  ['acked', 'Acknowledged', { acked: 'true' }],
  ['unacked', 'Not acknowledged', { acked: 'false' }],
  ['silenced', 'Silenced', { silenced: 'true' }],
  ['unsilenced', 'Not silenced', { silenced: 'false' }],
];

/** The state badges of a row: alerting, acknowledged, silenced (or a dash). */
function stateCell(r: RunRow): HTMLElement {
  const badges = [
    r.alerting ? h('span', { class: 'state s-alerting', title: 'In the alerting series: its alert fires' }, 'alerting') : null,
    r.acked ? h('span', { class: 'state s-acked', title: 'Acknowledged: left the alerting series' }, 'acknowledged') : null,
    r.silenced ? h('span', { class: 'state s-silenced', title: 'An Alertmanager silence covers its alert' }, 'silenced') : null,
  ].filter(Boolean);
  return badges.length ? h('span', { class: 'states' }, badges) : h('span', { class: 'faint' }, '–');
}

/** The page's elements: its head, the verdict chips, the filters, the table's place, the pager. */
function listElements(state: string) {
  const head = h(
    'div',
    { class: 'page-head' },
    h('div', {}, h('h1', { tabindex: '-1', id: 'page-title' }, 'Runs'), h('p', { class: 'muted' }, 'Every audited run, newest first. The list updates live as receipts arrive.')),
  );
  const chips = h('div', { class: 'chips', role: 'group', 'aria-label': 'Runs per verdict (press to filter)' });
  const verdictSelect = h('select', { id: 'filter-verdict', name: 'verdict' });
  const contractSelect = h('select', { id: 'filter-contract', name: 'contract' });
  const stateSelect = h('select', { id: 'filter-state', name: 'state' }, STATES.map(([k, label]) => h('option', { value: k, selected: k === state }, label)));
  const summary = h('span', { class: 'summary', role: 'status', 'aria-live': 'polite' });
  const body = h('div', { class: 'table-wrap' });
  const prev = h('button', { type: 'button', id: 'page-prev', disabled: true }, 'Previous page');
  const next = h('button', { type: 'button', id: 'page-next', disabled: true }, 'Next page');
  const pager = h('nav', { class: 'filters pager', 'aria-label': 'Pages of runs' }, prev, next);
  const card = h(
    'section',
    { class: 'card', 'aria-labelledby': 'page-title' },
    h('div', { class: 'filters' }, h('label', { for: 'filter-verdict' }, 'Verdict', verdictSelect), h('label', { for: 'filter-contract' }, 'Contract', contractSelect), h('label', { for: 'filter-state' }, 'State', stateSelect), summary),
    body,
    pager,
  );
  return { head, chips, verdictSelect, contractSelect, stateSelect, summary, body, prev, next, card };
}

/** One run's row; `flash`: it changed since the last load. */
function runRow(r: RunRow, flash: boolean): HTMLTableRowElement {
  return h(
    'tr',
    { 'data-run': r.run, class: flash ? 'flash' : undefined },
    // data-label names the column when a narrow screen shows each row as a card.
    h('td', { class: 'run', 'data-label': 'Run' }, h('a', { href: runHref(r.run) }, r.run)),
    h('td', { 'data-label': 'Verdict' }, verdictBadge(r.verdict), r.verdictSince ? h('div', { class: 'since' }, 'since ', whenEl(r.verdictSince)) : null),
    h('td', { 'data-label': 'Naive rule' }, naiveBadge(r.naive)),
    h('td', { class: 'nowrap', 'data-label': 'Contract' }, r.pin ? h('a', { href: contractHref(r.pin.contract) }, `${r.pin.contract}@${r.pin.version}`) : h('span', { class: 'faint' }, 'no pin'), r.pin ? h('div', { class: 'faint' }, r.pin.phase) : null),
    h('td', { class: 'msg', 'data-label': 'First finding' }, r.firstFinding ?? h('span', { class: 'faint' }, 'no findings')),
    h('td', { 'data-label': 'State' }, stateCell(r)),
    h('td', { class: 'time', 'data-label': 'Started' }, whenEl(r.startedAt), h('span', { class: 'updated' }, 'updated ', agoEl(r.updatedAt))),
  );
}

/** The table of the runs shown, or what to say when none is. */
function runsBody(d: RunList, changed: ReadonlySet<string>): HTMLElement {
  if (!d.runs.length) {
    return h(
      'div',
      { class: 'empty' },
      d.total
        ? 'No run matches these filters.'
        : h('span', {}, 'No runs yet. Send receipts as NDJSON to ', h('code', {}, 'POST /v1/receipts'), ' or OTLP traces to the OTLP ports.'),
    );
  }
  return h(
    'table',
    { 'aria-label': 'Runs', class: 'cards-narrow' },
    h('thead', {}, h('tr', {}, ['Run', 'Verdict', 'Naive rule', 'Contract', 'First finding', 'State', 'Started'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, d.runs.map((r) => runRow(r, changed.has(r.run)))),
  );
}

/** A chip per verdict with its count; pressing one filters by it (pressing the pressed one clears the filter). */
function verdictChips(d: RunList, verdict: string, pick: (v: string) => void): HTMLElement[] {
  return d.verdicts.map((v) =>
    h(
      'button',
      {
        type: 'button',
        class: `chip${d.counts[v] ? '' : ' zero'}`,
        'aria-pressed': String(verdict === v),
        title: d.meanings[v],
        onclick: () => pick(verdict === v ? '' : v),
      },
      verdictBadge(v),
      h('span', { class: 'n' }, d.counts[v]),
    ),
  );
}

/** The list API's query for these filters and cursor. */
function runsQuery(verdict: string, contract: string, after: string, state: string): URLSearchParams {
  const q = new URLSearchParams({ limit: '500' });
  if (verdict) q.set('verdict', verdict);
  if (contract) q.set('contract', contract);
  if (after) q.set('after', after);
  for (const [k, v] of Object.entries(STATES.find(([key]) => key === state)?.[2] ?? {})) q.set(k, v);
  return q;
}

export function listPage(ctx: Ctx, params: { query: URLSearchParams }): View {
  let verdict = params.query.get('verdict') ?? '';
  let contract = params.query.get('contract') ?? '';
  // Cursor paging: the page shown starts after `after` (the `next` of the page before); `before` the cursors of the
  // pages before it, for Previous.
  let after = params.query.get('after') ?? '';
  const before: string[] = [];
  let state = STATES.some(([k]) => k === (params.query.get('state') ?? '')) ? (params.query.get('state') ?? '') : '';
  let disposed = false;
  const changed = new Set<string>();
  ctx.setTitle('Runs');

  const { head, chips, verdictSelect, contractSelect, stateSelect, summary, body, prev, next, card } = listElements(state);
  let nextCursor: string | null = null;
  const goTo = (cursor: string) => {
    after = cursor;
    const q = new URLSearchParams(location.search);
    if (after) q.set('after', after);
    else q.delete('after');
    const qs = q.toString();
    history.replaceState(null, '', qs ? `/?${qs}` : '/');
    void load();
  };
  next.addEventListener('click', () => {
    if (nextCursor === null) return;
    before.push(after);
    goTo(nextCursor);
  });
  prev.addEventListener('click', () => goTo(before.pop() ?? ''));
  ctx.main.append(head, chips, card);

  const setFilter = (v: string, c: string, st = state) => {
    verdict = v;
    contract = c;
    after = '';
    before.length = 0;
    state = st;
    const q = new URLSearchParams();
    if (verdict) q.set('verdict', verdict);
    if (contract) q.set('contract', contract);
    if (state) q.set('state', state);
    const qs = q.toString();
    history.replaceState(null, '', qs ? `/?${qs}` : '/');
    void load();
  };
  verdictSelect.addEventListener('change', () => setFilter(verdictSelect.value, contract));
  contractSelect.addEventListener('change', () => setFilter(verdict, contractSelect.value));
  stateSelect.addEventListener('change', () => setFilter(verdict, contract, stateSelect.value));

  function render(d: RunList): void {
    verdictSelect.replaceChildren(
      h('option', { value: '' }, `All verdicts (${d.total})`),
      ...d.verdicts.map((v) => h('option', { value: v, selected: v === verdict }, `${v} (${d.counts[v]})`)),
    );
    verdictSelect.value = verdict;
    contractSelect.replaceChildren(h('option', { value: '' }, 'All contracts'), ...d.contracts.map((c) => h('option', { value: c, selected: c === contract }, c)));
    contractSelect.value = contract;
    chips.replaceChildren(...verdictChips(d, verdict, (v) => setFilter(v, contract)));
    const shown = d.runs.length;
    summary.textContent = `${shown} run${shown === 1 ? '' : 's'} shown${verdict || contract || state ? ' (filtered)' : ''}`;
    const silencedOption = stateSelect.querySelectorAll('option[value^="silenced"], option[value="unsilenced"]');
    silencedOption.forEach((o) => ((o as HTMLOptionElement).disabled = !d.silences));
    body.replaceChildren(runsBody(d, changed));
  }

  async function load(): Promise<void> {
    try {
      const d = await getJson<RunList>(`/ui/api/runs?${runsQuery(verdict, contract, after, state)}`);
      if (disposed) return;
      nextCursor = d.next ?? null;
      next.disabled = nextCursor === null;
      prev.disabled = after === '';
      render(d);
      changed.clear();
    } catch (e) {
      if (!disposed) body.replaceChildren(h('div', { class: 'empty', role: 'alert' }, `Could not load the runs: ${(e as Error).message}`));
    }
  }
  const refresh = coalesce(load, 250);
  void load();

  return {
    onRun(r) {
      changed.add(r.run);
      refresh();
    },
    onRefresh: refresh,
    dispose() {
      disposed = true;
    },
  };
}
