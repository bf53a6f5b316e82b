/**
 * The shadow page: per candidate version (`serve --shadow CONTRACT@VERSION`), its verdicts counted over the live
 * runs, how many runs it disagrees with their pinned verdict on, the edges behind the difference, and the
 * disagreeing runs one by one. The pinned verdicts are never changed by a candidate.
 */
import type { ShadowSummary } from '../../core/shadow.js';
import type { Ctx, View } from './page.js';
import { coalesce, contractHref, getJson, h, runHref, verdictBadge } from './dom.js';

function candidateCard(c: ShadowSummary): HTMLElement {
  const counts = Object.entries(c.verdicts).sort((a, b) => (b[1] ?? 0) - (a[1] ?? 0));
  return h(
    'section',
    { class: 'card shadow-candidate', 'data-candidate': `${c.contract}@${c.version}`, 'data-disagreements': c.disagreements },
    h('h2', {}, 'Candidate ', h('a', { href: contractHref(c.contract) }, c.contract), ` v${c.version}`),
    h(
      'p',
      {},
      h('strong', { class: 'disagreements' }, String(c.disagreements)),
      ` of ${c.runs} run(s) would get another verdict under this candidate. Pinned verdicts are unchanged.`,
    ),
    h(
      'table',
      { 'aria-label': `Shadow verdicts under ${c.contract} v${c.version}`, class: 'shadow-counts' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Shadow verdict'), h('th', { scope: 'col' }, 'Runs'))),
      h('tbody', {}, counts.map(([v, n]) => h('tr', { 'data-verdict': v }, h('td', {}, verdictBadge(v)), h('td', { class: 'count' }, String(n))))),
    ),
    c.edges.length
      ? h(
          'div',
          {},
          h('h3', {}, 'What causes the difference'),
          h('ul', { class: 'shadow-edges' }, c.edges.map((e) => h('li', { 'data-edge': e.edge }, h('span', { class: 'mono' }, e.edge), ` — ${e.runs} run(s)`))),
        )
      : null,
    c.disagreeing.length
      ? h(
          'table',
          { 'aria-label': `Runs where ${c.contract} v${c.version} disagrees`, class: 'shadow-runs cards-narrow' },
          h('thead', {}, h('tr', {}, ['Run', 'Pinned verdict', 'Candidate verdict', 'Edges'].map((t) => h('th', { scope: 'col' }, t)))),
          h(
            'tbody',
            {},
            c.disagreeing.map((d) =>
              h(
                'tr',
                { 'data-run': d.run },
                // data-label names the column when a narrow screen shows each row as a card.
                h('td', { class: 'run', 'data-label': 'Run' }, h('a', { href: runHref(d.run) }, d.run)),
                h('td', { class: 'pinned', 'data-label': 'Pinned verdict' }, verdictBadge(d.pinned)),
                h('td', { class: 'shadow', 'data-label': 'Candidate verdict' }, verdictBadge(d.shadow)),
                h('td', { class: 'mono', 'data-label': 'Edges' }, d.edges.join('; ')),
              ),
            ),
          ),
        )
      : h('p', { class: 'muted' }, 'No run disagrees so far.'),
  );
}

export function shadowPage(ctx: Ctx): View {
  let disposed = false;
  ctx.setTitle('Shadow');
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  ctx.main.append(
    h('div', { class: 'page-head' }, h('div', {}, h('h1', { tabindex: '-1' }, 'Shadow evaluation'), h('p', { class: 'muted' }, 'Candidate contract versions evaluated beside the pinned ones, run by run.'))),
    body,
  );
  async function load(): Promise<void> {
    try {
      const d = await getJson<{ candidates: ShadowSummary[] }>('/ui/api/shadow');
      if (disposed) return;
      body.replaceChildren(
        ...(d.candidates.length
          ? d.candidates.map(candidateCard)
          : [h('div', { class: 'card' }, h('p', { class: 'empty' }, 'No candidate is shadow-evaluated. Start the server with --shadow CONTRACT@VERSION.'))]),
      );
    } catch (e) {
      if (!disposed) body.replaceChildren(h('p', { role: 'alert' }, `Could not load the shadow evaluation: ${(e as Error).message}`));
    }
  }
  const refresh = coalesce(load, 250);
  void load();
  return {
    onRun: refresh,
    onRefresh: refresh,
    dispose() {
      disposed = true;
    },
  };
}
