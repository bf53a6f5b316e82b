/** The run page: verdict beside the naive rule, the contract's graph with the run laid over it, findings and receipts. */
import type { Finding, HandoffReceipt, Receipt } from '../../core/types.js';
import type { EdgeRow, RunView } from '../view.js';
import type { Ctx, View } from './page.js';
import { fetchBoard, handoffsCard } from './handoffs.js';
import { HttpError, agoEl, clock, coalesce, contractHref, countdownEl, dur, getJson, h, legendEl, naiveBadge, stateChips, tick, utc, utcDateTime, verdictBadge, whenEl } from './dom.js';

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** A handoff receipt's line: the handoff, attempt and state, its budget operation and units, its parties. */
export function handoffDetail(r: HandoffReceipt): string {
  const units = r.units ? Object.entries(r.units).filter(([, n]) => n !== undefined).map(([k, n]) => `${n} ${k}`).join(', ') : '';
  const budget = r.budgetOp ? `budget ${r.budgetOp}${units ? ` ${units}` : ''}` : '';
  const parts = [
    r.handoff !== undefined ? `handoff ${r.handoff}${r.attempt ? ` #${r.attempt}` : ''}` : '',
    r.state ?? '',
    budget,
    r.from && r.to ? `${r.from} → ${r.to}` : r.from ? `from ${r.from}` : '',
  ];
  return parts.filter(Boolean).join(' ') || 'handoff';
}

export function receiptDetail(r: Receipt): string {
  switch (r.type) {
    case 'run.start':
      return `pins ${r.contract}${r.version ? `@${r.version}` : ''}${r.phase ? ` / ${r.phase}` : ''}`;
    case 'edge':
      return `${r.from} → ${r.to} : ${r.kind}`;
    case 'wait':
      return `${r.from ? `${r.from} ` : ''}waits on ${r.on} for ${r.edge} until ${r.deadline ? utc(r.deadline) : '?'}`;
    case 'outcome':
      return `${r.verified ? 'verified' : 'unverified'} outcome${r.from ? ` from ${r.from}` : ''}`;
    case 'run.end':
      return `run ended ${r.result}${r.from ? ` by ${r.from}` : ''}`;
    case 'gap':
      return `evidence gap: ${r.reason}${r.to ? ` (${r.to})` : ''}`;
    case 'handoff':
      return handoffDetail(r);
    default:
      return '';
  }
}

/** Candidate versions shadow-evaluated for this run, beside its pinned verdict (which they never change). */
function shadowCard(v: RunView): HTMLElement | string {
  const shadow = v.run.shadow ?? [];
  if (!shadow.length) return '';
  return h(
    'section',
    { class: 'card run-shadow', 'aria-label': 'Shadow evaluation' },
    h('div', { class: 'card-head' }, h('h2', {}, 'Shadow evaluation')),
    h('p', { class: 'muted card-body' }, 'What candidate versions would say about this run. The pinned verdict above is unchanged.'),
    h(
      'ul',
      { class: 'card-body' },
      shadow.map((s) =>
        h(
          'li',
          { 'data-candidate': `${s.contract}@${s.version}`, 'data-disagrees': String(s.disagrees) },
          h('a', { href: contractHref(s.contract) }, `${s.contract} v${s.version}`),
          ': ',
          verdictBadge(s.verdict),
          s.disagrees ? ` disagrees with the pinned ${v.run.verdict}` : ' agrees',
          s.findings.find((f) => f.verdict === s.verdict) ? ` — ${s.findings.find((f) => f.verdict === s.verdict)!.message}` : '',
        ),
      ),
    ),
  );
}

/** The Alertmanager silence on this run's alert (with serve --alertmanager-url): who, until when, why. */
function silenceCard(v: RunView): HTMLElement | string {
  const s = v.silence;
  if (!s) return '';
  return h(
    'section',
    { class: 'card run-silence', 'aria-label': 'Alertmanager silence', 'data-silence': s.id },
    h('h2', {}, 'Silenced in Alertmanager'),
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'by'),
      h('dd', { 'data-field': 'createdBy' }, s.createdBy),
      h('dt', {}, 'until'),
      h('dd', { 'data-field': 'endsAt' }, h('time', { datetime: s.endsAt, title: utc(s.endsAt) }, utc(s.endsAt)), ' (', countdownEl(s.endsAt), ')'),
      h('dt', {}, 'comment'),
      h('dd', { 'data-field': 'comment' }, s.comment || '–'),
      h('dt', {}, 'matchers'),
      h('dd', { class: 'mono' }, s.matchers.join(', ')),
    ),
  );
}

/** Who acknowledged the run, when and why (operator text, shown as text). */
function ackNote(v: RunView): HTMLElement | null {
  const a = v.ack;
  if (!a) return null;
  const lead = a.current ? 'Acknowledged' : `Acknowledged earlier (as ${a.verdict})`;
  return h('p', { class: 'ack', 'data-ack': a.current ? 'current' : 'earlier' }, `${lead}${a.by ? ` by ${a.by}` : ''} `, agoEl(a.at), a.reason ? `: ${a.reason}` : '');
}

function summary(v: RunView): HTMLElement {
  const run = v.run;
  const differs = (run.naive === 'green') !== (run.verdict === 'healthy');
  return h(
    'section',
    { class: 'card', 'aria-label': 'Verdict' },
    h(
      'div',
      { class: 'summary-grid' },
      h(
        'div',
        {},
        h('div', { class: 'label', id: 'verdict-label' }, 'Verdict'),
        h('div', { class: 'value', 'aria-labelledby': 'verdict-label', 'data-verdict': run.verdict }, verdictBadge(run.verdict, true), h('span', { class: 'badge settled' }, run.settled ? 'settled' : 'open')),
        h('p', {}, v.meaning, '.'),
        v.verdictSince ? h('p', { class: 'since', id: 'verdict-since' }, `In ${run.verdict} since `, whenEl(v.verdictSince), '.') : null,
        v.alerting !== null ? h('p', { class: 'alert-state', 'data-alerting': String(v.alerting) }, v.alerting ? 'Alerting: its alert fires until acknowledged or the alert window ends.' : 'Not alerting.') : null,
        ackNote(v),
      ),
      h(
        'div',
        {},
        h('div', { class: 'label' }, 'Naive rule, for comparison'),
        h('div', { class: 'value', 'data-naive': run.naive }, naiveBadge(run.naive, true)),
        h('p', {}, v.naiveMeaning, differs ? ' The audit disagrees.' : ''),
      ),
      h(
        'div',
        {},
        h('div', { class: 'label' }, 'Pinned contract'),
        run.pin
          ? h(
              'dl',
              { class: 'facts' },
              h('dt', {}, 'contract'),
              h('dd', {}, h('a', { href: contractHref(run.pin.contract) }, `${run.pin.contract}@${run.pin.version}`)),
              h('dt', {}, 'phase'),
              h('dd', {}, run.pin.phase),
              h('dt', {}, 'started'),
              h('dd', {}, whenEl(run.startedAt)),
              h('dt', {}, 'updated'),
              h('dd', {}, whenEl(run.updatedAt)),
              v.nextChangeAt ? [h('dt', {}, 'may change'), h('dd', {}, agoEl(v.nextChangeAt))] : null,
            )
          : h('p', {}, 'No resolvable pin.'),
      ),
    ),
  );
}

function edgeTable(edges: EdgeRow[]): HTMLElement {
  return h(
    'details',
    { class: 'edge-details' },
    h('summary', { class: 'card-body' }, `Edge table (${edges.length} edges): the graph as text`),
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { 'aria-label': 'Edges of the graph', class: 'cards-narrow' },
        h('thead', {}, h('tr', {}, ['Edge', 'State', 'Label', 'Observed', 'Deadline', 'Findings'].map((t) => h('th', { scope: 'col' }, t)))),
        h(
          'tbody',
          {},
          edges.map((e) =>
            h(
              'tr',
              { 'data-edge': e.id },
              h('td', { class: 'edge-key', 'data-label': 'Edge' }, e.id),
              h('td', { 'data-label': 'State' }, stateChips(e.states)),
              h('td', { 'data-label': 'Label' }, `${e.label[0]} · ${e.label[1]}`),
              h('td', { 'data-label': 'Observed' }, e.count ? `${e.count}${e.max !== undefined ? ` of max ${e.max}` : ''}` : '–'),
              h('td', { 'data-label': 'Deadline' }, e.deadline ? countdownEl(e.deadline) : '–', e.dependency ? h('div', { class: 'faint' }, `on ${e.dependency}`) : null),
              h('td', { class: 'mono', 'data-label': 'Findings' }, e.findings.join(', ') || '–'),
            ),
          ),
        ),
      ),
    ),
  );
}

function graphCard(v: RunView): HTMLElement {
  const g = v.graph;
  const card = h(
    'section',
    { class: 'card', 'aria-labelledby': 'graph-title' },
    h(
      'div',
      { class: 'card-head' },
      h('h2', { id: 'graph-title' }, 'Intended versus observed topology'),
      g ? h('span', { class: 'count' }, `${plural(g.nodes.length, 'agent')} · ${plural(g.edges.filter((e) => e.count).length, 'observed edge')}`) : null,
    ),
  );
  if (!g) {
    card.append(h('div', { class: 'empty' }, v.graphMissing ?? 'No graph.'));
    return card;
  }
  const panel = h('div', { class: 'graph-panel', id: 'graph' });
  panel.innerHTML = g.svg; // rendered and escaped by the server
  card.append(legendEl(g.legend), panel, edgeTable(g.edges));
  return card;
}

function findingsCard(findings: Finding[]): HTMLElement {
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'findings-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'findings-title' }, 'Findings'), h('span', { class: 'count' }, `${findings.length}`)),
    findings.length
      ? h(
          'ul',
          { class: 'finding-list', id: 'findings' },
          findings.map((f) =>
            h(
              'li',
              { class: 'finding', 'data-code': f.code },
              h('div', {}, verdictBadge(f.verdict), h('div', { class: 'code' }, f.code)),
              h(
                'div',
                {},
                h(
                  'div',
                  { class: 'what' },
                  f.message,
                  // Countdowns are rendered now from the finding's times (optional fields), never frozen in the message.
                  (f as { deadline?: string }).deadline ? h('span', { class: 'faint' }, ' (', countdownEl((f as { deadline?: string }).deadline!), ')') : null,
                  (f as { since?: string }).since ? h('span', { class: 'faint' }, ' (since ', agoEl((f as { since?: string }).since!), ')') : null,
                ),
                h(
                  'div',
                  { class: 'meta' },
                  f.edge ? h('span', {}, 'edge ', h('span', { class: 'edge-key' }, f.edge)) : null,
                  f.agents.length ? h('span', {}, `agents ${f.agents.join(', ')}`) : null,
                  f.events.length ? h('span', {}, `events ${f.events.join(', ')}`) : null,
                  h('span', {}, f.settled ? 'settled' : 'may still clear'),
                ),
              ),
            ),
          ),
        )
      : h('div', { class: 'empty', id: 'findings' }, 'No findings: everything observed conforms.'),
  );
}

function timelineCard(receipts: Receipt[], cited: Set<string>, fresh: Set<string>): HTMLElement {
  const t0 = receipts.length ? Date.parse(receipts[0].at) : 0;
  // Each receipt on a new UTC day shows that date (the first always does): a timeline of old runs places itself.
  let day = '';
  const dateOf = (at: string) => {
    const d = new Date(at).toISOString().slice(0, 10);
    if (d === day) return null;
    day = d;
    return h('span', { class: 'd' }, d);
  };
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'timeline-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'timeline-title' }, 'Receipt timeline'), h('span', { class: 'count' }, `${plural(receipts.length, 'receipt')}${receipts.length ? ` from ${utcDateTime(receipts[0].at)}` : ''} · times in UTC · highlighted: cited by a finding`)),
    h(
      'ol',
      { class: 'timeline', id: 'timeline' },
      receipts.map((r) =>
        h(
          'li',
          { 'data-event': r.event, class: [cited.has(r.event) ? 'cited' : '', fresh.has(r.event) ? 'new' : ''].filter(Boolean).join(' ') || undefined },
          h('time', { class: 't', datetime: r.at, title: utc(r.at) }, dateOf(r.at), clock(r.at)),
          h('span', { class: 'off' }, Date.parse(r.at) === t0 ? '+0s' : `+${dur(Date.parse(r.at) - t0)}`),
          h('span', { class: 'type' }, r.type),
          h('span', {}, receiptDetail(r)),
          h('span', { class: 'ev' }, r.event, r.version ? ` · v${r.version}` : '', r.status && r.status !== 'ok' ? ` · ${r.status}` : ''),
        ),
      ),
    ),
  );
}

export function runPage(ctx: Ctx, params: { id?: string }): View {
  const id = params.id ?? '';
  let disposed = false;
  let seen: Set<string> | null = null;
  ctx.setTitle(id);

  const title = h('h1', { class: 'mono', tabindex: '-1' }, id);
  const head = h('div', {}, h('div', { class: 'crumbs' }, h('a', { href: '/' }, 'Runs'), ' / ', id), h('div', { class: 'page-head' }, h('div', {}, title)));
  const content = h('div', { 'aria-live': 'off' }, h('p', { class: 'muted' }, 'Loading…'));
  ctx.main.append(head, content);

  async function load(): Promise<void> {
    let v: RunView;
    const board = fetchBoard(id); // the Handoffs panel (src/ui/client/handoffs.ts)
    try {
      v = await getJson<RunView>(`/ui/api/runs/${encodeURIComponent(id)}`);
    } catch (e) {
      if (disposed) return;
      const unknown = e instanceof HttpError && e.status === 404;
      content.replaceChildren(
        h('div', { class: 'card' }, h('div', { class: 'empty', role: 'alert' }, unknown ? `No run “${id}” is known to this server (yet). The page fills in when its first receipt arrives.` : `Could not load the run: ${(e as Error).message}`)),
      );
      return;
    }
    if (disposed) return;
    const events = v.run.receipts.map((r) => r.event);
    const fresh = seen ? new Set(events.filter((e) => !seen!.has(e))) : new Set<string>();
    seen = new Set(events);
    const cited = new Set(v.run.findings.flatMap((f) => f.events));
    const focused = document.activeElement?.closest?.('[data-edge]')?.getAttribute('data-edge') ?? null;
    const details = content.querySelector('details.edge-details') as HTMLDetailsElement | null;
    const detailsOpen = details?.open ?? false;
    const handoffs = handoffsCard(await board);
    if (disposed) return;
    content.replaceChildren(summary(v), silenceCard(v), shadowCard(v), ...(handoffs ? [handoffs] : []), graphCard(v), findingsCard(v.run.findings), timelineCard(v.run.receipts, cited, fresh));
    if (detailsOpen) (content.querySelector('details.edge-details') as HTMLDetailsElement | null)?.setAttribute('open', '');
    if (focused) (content.querySelector(`svg [data-edge="${CSS.escape(focused)}"]`) as SVGElement | null)?.focus();
    tick(content);
  }
  const refresh = coalesce(load, 100);
  void load();

  return {
    onRun(row) {
      if (row.run === id) refresh();
    },
    onRefresh: refresh,
    dispose() {
      disposed = true;
    },
  };
}
