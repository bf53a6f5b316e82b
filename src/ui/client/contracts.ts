/** Contract pages: the list of contracts, and one contract's versions side by side with what changed. */
import type { ContractChanges } from '../../render/contract-diff.js';
import type { ContractSummary, ContractVersionView, ContractView } from '../view.js';
import type { Ctx, View } from './page.js';
import { contractHref, getJson, h, legendEl } from './dom.js';

export function contractsPage(ctx: Ctx): View {
  let disposed = false;
  ctx.setTitle('Contracts');
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  ctx.main.append(
    h('div', { class: 'page-head' }, h('div', {}, h('h1', { tabindex: '-1' }, 'Contracts'), h('p', { class: 'muted' }, 'The topology contracts this server audits against, with every version.'))),
    body,
  );
  void getJson<{ contracts: ContractSummary[] }>('/ui/api/contracts').then(
    (d) => {
      if (disposed) return;
      body.replaceChildren(
        h(
          'section',
          { class: 'card' },
          h(
            'table',
            { 'aria-label': 'Contracts' },
            h('thead', {}, h('tr', {}, ['Contract', 'Versions', 'Owner', 'Agents', 'Phases'].map((t) => h('th', { scope: 'col' }, t)))),
            h(
              'tbody',
              {},
              d.contracts.map((c) => {
                const newest = c.versions[c.versions.length - 1];
                return h(
                  'tr',
                  {},
                  h('td', { class: 'run' }, h('a', { href: contractHref(c.contract) }, c.contract)),
                  h('td', {}, h('span', { class: 'states' }, c.versions.map((v) => h('span', { class: `badge${v.retired ? ' retired' : ''}` }, `v${v.version}${v.retired ? ' retired' : ''}`)))),
                  h('td', {}, newest.owner),
                  h('td', {}, String(newest.agents)),
                  h('td', {}, newest.phases.join(', ')),
                );
              }),
            ),
          ),
        ),
      );
    },
    (e) => {
      if (!disposed) body.replaceChildren(h('p', { role: 'alert' }, `Could not load the contracts: ${(e as Error).message}`));
    },
  );
  return {
    dispose() {
      disposed = true;
    },
  };
}

function changeList(c: ContractChanges): HTMLElement {
  const items: HTMLElement[] = [];
  const add = (sign: '+' | '−' | '~', cls: string, text: string) => items.push(h('li', {}, h('span', { class: `chg ${cls}`, 'aria-label': cls === 'add' ? 'added' : cls === 'del' ? 'removed' : 'changed' }, sign), text));
  if (c.owner) add('~', 'mod', `owner ${c.owner.from} → ${c.owner.to}`);
  for (const a of c.agents.added) add('+', 'add', `agent ${a}`);
  for (const a of c.agents.removed) add('−', 'del', `agent ${a}`);
  for (const a of c.allow.added) add('+', 'add', `allow ${a}`);
  for (const a of c.allow.removed) add('−', 'del', `allow ${a}`);
  for (const a of c.allow.changed) add('~', 'mod', `allow ${a.item}: ${a.what.join(', ')}`);
  for (const p of c.phases) {
    if (p.status === 'added') add('+', 'add', `phase ${p.phase}`);
    if (p.status === 'removed') add('−', 'del', `phase ${p.phase}`);
    if (p.outcome) add('~', 'mod', `phase ${p.phase}: outcome ${p.outcome.from} → ${p.outcome.to}`);
    if (p.status === 'added' || p.status === 'removed') continue;
    for (const s of p.steps.added) add('+', 'add', `${p.phase} plan: ${s}`);
    for (const s of p.steps.removed) add('−', 'del', `${p.phase} plan: ${s}`);
    for (const s of p.steps.changed) add('~', 'mod', `${p.phase} plan: ${s.item}: ${s.what.join(', ')}`);
  }
  return h(
    'div',
    { class: 'changes', 'data-changes-from': c.from },
    h('h3', {}, `Changes from v${c.from}`),
    items.length ? h('ul', {}, items) : h('p', { class: 'muted' }, 'Same content apart from the version.'),
  );
}

function versionCard(v: ContractVersionView, newest: boolean): HTMLElement {
  const card = h(
    'section',
    { class: 'card version', 'data-version': v.version, 'aria-label': `Version ${v.version}` },
    h(
      'div',
      { class: 'card-head' },
      h('h2', {}, `Version ${v.version}`),
      h(
        'span',
        { class: 'states' },
        v.retired ? h('span', { class: 'badge retired' }, 'retired') : null,
        v.candidate ? h('span', { class: 'badge candidate', title: 'A draft under review: never pinned, only shadow-evaluated' }, 'candidate') : null,
        newest ? h('span', { class: 'badge v-healthy' }, 'newest') : null,
        h('span', { class: 'badge mono', title: `sha256 ${v.hash}` }, v.hash.slice(0, 10)),
      ),
    ),
  );
  if (v.changes) card.append(changeList(v.changes));
  card.append(
    h(
      'div',
      { class: 'kv' },
      h('span', { class: 'k' }, 'owner'),
      h('span', {}, v.owner),
      h('span', { class: 'k' }, 'agents'),
      h('span', {}, v.agents.join(', ')),
      h('span', { class: 'k' }, 'allow'),
      h('ul', { class: 'list-plain' }, v.allow.map((a) => h('li', { class: 'edge-key' }, a.edge, a.max > 1 ? h('span', { class: 'faint' }, ` (max ${a.max})`) : null))),
    ),
  );
  for (const p of v.phases) {
    const panel = h('div', { class: 'graph-panel' });
    panel.innerHTML = p.graph.svg; // rendered and escaped by the server
    card.append(
      h(
        'div',
        { class: 'phase', 'data-phase': p.name },
        h('div', { class: 'phase-head' }, h('h3', {}, `Phase ${p.name}`), h('span', { class: 'badge' }, `outcome ${p.outcome}`)),
        h(
          'ol',
          { class: 'plan', 'aria-label': `Plan of phase ${p.name}` },
          p.plan.map((s) =>
            h(
              'li',
              {},
              h('span', { class: 'edge-key' }, s.edge),
              s.dependency || s.within ? h('span', { class: 'faint' }, ` — on ${s.dependency ?? '–'}, within ${s.within ?? '–'}`) : null,
            ),
          ),
        ),
        panel,
      ),
    );
  }
  return card;
}

export function contractPage(ctx: Ctx, params: { id?: string }): View {
  const id = params.id ?? '';
  let disposed = false;
  ctx.setTitle(id);
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  ctx.main.append(
    h('div', { class: 'crumbs' }, h('a', { href: '/contracts' }, 'Contracts'), ' / ', id),
    h('div', { class: 'page-head' }, h('div', {}, h('h1', { class: 'mono', tabindex: '-1' }, id), h('p', { class: 'muted' }, 'Every version side by side, oldest first, each with what changed from the one before.'))),
    body,
  );
  void getJson<ContractView>(`/ui/api/contracts/${encodeURIComponent(id)}`).then(
    (d) => {
      if (disposed) return;
      const newest = [...d.versions].reverse().find((v) => !v.retired && !v.candidate)?.version;
      body.replaceChildren(h('section', { class: 'card legend-card', 'aria-label': 'Legend' }, legendEl(d.legend)), h('div', { class: 'versions' }, d.versions.map((v) => versionCard(v, v.version === newest))));
    },
    (e) => {
      if (!disposed) body.replaceChildren(h('div', { class: 'card' }, h('div', { class: 'empty', role: 'alert' }, `Could not load contract “${id}”: ${(e as Error).message}`)));
    },
  );
  return {
    dispose() {
      disposed = true;
    },
  };
}
