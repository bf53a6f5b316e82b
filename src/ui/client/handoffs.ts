/**
 * The run page's Handoffs panel: the operator's board (GET /ui/api/runs/{run}/handoffs, the same board as
 * /api/v1/runs/{run}/handoffs). One row per branch, conflicts highlighted, the budget against the root,
 * effects that may have happened and the terminal predicate. Lease countdowns tick client-side (dom.ts tick).
 * Text only: every value is set as text, never as HTML.
 */
import type { BoardBranch, HandoffBoard } from '../../handoff/board.js';
import type { Units } from '../../core/index.js';
import { clock, countdownEl, getJson, h, utc } from './dom.js';

/** The run's board, or null when it cannot be loaded (the rest of the page still shows). */
export async function fetchBoard(run: string): Promise<HandoffBoard | null> {
  try {
    return await getJson<HandoffBoard>(`/ui/api/runs/${encodeURIComponent(run)}/handoffs`);
  } catch {
    return null;
  }
}

const badge = (cls: string, text: string) => h('span', { class: `badge ${cls}` }, text);

function cancelText(b: BoardBranch): string {
  if (!b.cancelled) return 'not cancelled';
  const when = b.cancelledAt ? ` at ${clock(b.cancelledAt)}` : '';
  const late = b.late ? '; late work recorded after it' : '';
  return b.cancelPropagated ? `cancelled${when}, propagated (branch ended ${b.state})${late}` : `cancelled${when}, NOT propagated: branch still ${b.state}${late}`;
}

function versionEl(b: BoardBranch, current: string | null): HTMLElement {
  if (b.stateVersion === null) return h('span', { class: 'muted' }, 'not recorded');
  return h(
    'span',
    { 'data-stale': b.stale ? 'true' : 'false' },
    `${b.stateVersion} ${b.stateVersionSource === 'observed' ? 'observed' : 'granted'}`,
    current !== null ? ` · current ${current} ` : ' ',
    b.stale ? badge('ho-warn', 'stale') : current !== null ? badge('ho-ok', 'current') : null,
  );
}

function branchRow(b: BoardBranch, board: HandoffBoard, conflicted: Set<string>): HTMLElement {
  const lease = b.leaseExpiresAt === null
    ? h('span', { class: 'muted' }, 'none')
    : b.live
      ? h('span', {}, countdownEl(b.leaseExpiresAt), ` (${clock(b.leaseExpiresAt)})`)
      : h('span', {}, `${clock(b.leaseExpiresAt)} (branch ended)`);
  return h(
    'li',
    {
      class: 'ho-branch',
      'data-branch': b.branch,
      'data-live': b.live ? 'true' : 'false',
      'data-cancelled': b.cancelled ? 'true' : 'false',
      'data-conflict': conflicted.has(b.branch) ? 'true' : 'false',
    },
    h(
      'div',
      { class: 'ho-title' },
      h('span', { class: 'ho-id' }, b.branch),
      h('span', { class: 'ho-state', 'data-state': b.state }, badge(b.live ? 'ho-live' : b.state === 'ACCEPTED' ? 'ho-ok' : 'ho-bad', b.state)),
      h('time', { datetime: b.stateAt, title: utc(b.stateAt), class: 'muted' }, `since ${clock(b.stateAt)}`),
      b.live ? badge('ho-live', 'live') : null,
      conflicted.has(b.branch) ? badge('ho-warn', 'duplicate key conflict') : null,
      b.admitted ? badge('ho-ok', 'artifact admitted') : null,
    ),
    h(
      'dl',
      {},
      h('dt', {}, 'target'), h('dd', { class: 'mono' }, `${b.from ?? '?'} → ${b.to ?? '?'}`),
      h('dt', {}, 'state version'), h('dd', { class: 'ho-version' }, versionEl(b, board.currentStateVersion)),
      h('dt', {}, 'lease'), h('dd', { class: 'ho-lease' }, lease),
      h('dt', {}, 'duplicate key'), h('dd', { class: 'mono ho-key' }, b.duplicateKey ?? '–'),
      h('dt', {}, 'capabilities'), h('dd', { class: 'mono' }, b.capabilities === null ? 'not recorded' : b.capabilities.join(', ') || 'none'),
      h('dt', {}, 'cancel'), h('dd', { class: 'ho-cancel' }, cancelText(b)),
      h('dt', {}, 'findings'), h('dd', { class: 'mono' }, b.findings.join(', ') || '–'),
    ),
  );
}

const UNIT_ROWS = ['reserved', 'consumed', 'released', 'rejected', 'outstanding', 'peakCommitted'] as const;
const UNIT_LABEL: Record<(typeof UNIT_ROWS)[number], string> = {
  reserved: 'reserved', consumed: 'consumed', released: 'released', rejected: 'rejected', outstanding: 'still reserved', peakCommitted: 'peak committed',
};

function budgetTable(board: HandoffBoard): HTMLElement {
  const root = board.budget.root;
  const cells = (u: Units) => [u.actions, u.contextUnits, u.effects].map((n) => h('td', {}, String(n)));
  const over = (u: Units) => root !== null && (u.actions > root.actions || u.contextUnits > root.contextUnits || u.effects > root.effects);
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'ho-budget', 'aria-label': 'Handoff budget against the root' },
      h('thead', {}, h('tr', {}, ['', 'actions', 'context', 'effects'].map((t) => h('th', { scope: 'col' }, t)))),
      h(
        'tbody',
        {},
        h('tr', { 'data-row': 'root' }, h('td', {}, 'root'), root ? cells(root) : h('td', { colspan: 3, class: 'muted' }, 'no root budget recorded')),
        UNIT_ROWS.map((k) => h('tr', { 'data-row': k, class: k === 'peakCommitted' && over(board.budget[k]) ? 'ho-over' : undefined }, h('td', {}, UNIT_LABEL[k]), cells(board.budget[k]))),
      ),
    ),
  );
}

/** The panel, or null when the run has no handoff receipts. */
export function handoffsCard(board: HandoffBoard | null): HTMLElement | null {
  if (board === null || (board.branches.length === 0 && board.budget.root === null)) return null;
  const conflicted = new Set(board.conflicts.flatMap((c) => c.branches));
  const live = board.branches.filter((b) => b.live).length;
  const t = board.terminal;
  return h(
    'section',
    { class: 'card', id: 'handoffs', 'aria-labelledby': 'handoffs-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'handoffs-title' }, 'Handoffs'), h('span', { class: 'count' }, `${board.branches.length} branches · ${live} live · ${board.conflicts.length} conflicts`)),
    h(
      'dl',
      { class: 'ho-facts' },
      h('div', {}, h('dt', {}, 'run owner'), h('dd', { 'data-fact': 'owner' }, board.owner ?? 'none named')),
      h('div', {}, h('dt', {}, 'final owner'), h('dd', { 'data-fact': 'finalOwner' }, board.finalOwners.join(', ') || 'none named')),
      h('div', {}, h('dt', {}, 'current state version'), h('dd', {}, board.currentStateVersion ?? '–')),
      h('div', {}, h('dt', {}, 'terminal predicate'), h('dd', { 'data-fact': 'terminal', 'data-met': t.met ? 'true' : 'false' }, badge(t.met ? 'ho-ok' : 'ho-warn', t.met ? 'met' : 'not met'))),
    ),
    h('ul', { class: 'ho-branches', 'aria-label': 'Branches' }, board.branches.map((b) => branchRow(b, board, conflicted))),
    h(
      'div',
      { class: 'ho-section', id: 'handoff-conflicts' },
      h('h3', {}, 'Conflicts'),
      board.conflicts.length
        ? h('ul', {}, board.conflicts.map((c) => h('li', { class: 'ho-conflict', 'data-key': c.duplicateKey }, h('span', { class: 'mono' }, c.duplicateKey), `: ${c.branches.join(', ')} held active leases at once `, badge(c.open ? 'ho-bad' : 'ho-warn', c.open ? 'open' : 'closed'))))
        : h('p', { class: 'muted' }, 'No duplicate-key conflict.'),
    ),
    h('div', { class: 'ho-section' }, h('h3', {}, 'Budget against the root'), budgetTable(board)),
    h(
      'div',
      { class: 'ho-section', id: 'handoff-funnel' },
      h('h3', {}, 'Artifact admission funnel'),
      h('p', { class: 'mono' }, `dispatched ${board.funnel.dispatched} › before lease ${board.funnel.completedBeforeLease} › valid ${board.funnel.structurallyValid} › current ${board.funnel.inScopeAndCurrent} › non-duplicate ${board.funnel.nonDuplicate} › admitted ${board.funnel.admitted}`),
    ),
    h(
      'div',
      { class: 'ho-section', id: 'handoff-effects' },
      h('h3', {}, 'Effects that may have happened'),
      board.effects.length
        ? h('ul', {}, board.effects.map((e) => h('li', { 'data-branch': e.branch, 'data-status': e.status }, h('span', { class: 'mono' }, e.branch), ' ', e.effect ? h('span', { class: 'mono' }, e.effect) : `${e.units} effect unit(s) in the ledger`, ' ', badge(e.mayHaveOccurred ? 'ho-warn' : 'ho-ok', e.status), e.mayHaveOccurred ? ' reconcile' : '')))
        : h('p', { class: 'muted' }, 'None recorded, none counted in the ledger.'),
    ),
    h(
      'div',
      { class: 'ho-section', id: 'handoff-terminal' },
      h('h3', {}, 'Terminal predicate'),
      h('p', {}, t.predicate, '.'),
      t.remaining.length ? h('ul', {}, t.remaining.map((r) => h('li', {}, r))) : h('p', { class: 'muted' }, 'Nothing remains.'),
    ),
  );
}
