/**
 * The web view in the browser: client-side routing over real paths (links work without it too), one
 * server-sent event stream for live run updates, and a one-second tick for countdowns.
 */
import type { RunRow } from '../view.js';
import { tick } from './dom.js';
import { contractPage, contractsPage } from './contracts.js';
import { listPage } from './list.js';
import { runPage } from './run.js';
import { shadowPage } from './shadow.js';

export type { Ctx, View } from './page.js';
import type { Ctx, View } from './page.js';

type Page = (ctx: Ctx, params: { id?: string; query: URLSearchParams }) => View;

function match(path: string): { page: Page; id?: string; section: string } | null {
  if (path === '/' || path === '/runs' || path === '/runs/') return { page: listPage, section: 'runs' };
  let m = /^\/runs\/([^/]+)$/.exec(path);
  if (m) return { page: runPage, id: decodeURIComponent(m[1]), section: 'runs' };
  if (path === '/contracts' || path === '/contracts/') return { page: contractsPage, section: 'contracts' };
  if (path === '/shadow') return { page: shadowPage, section: 'shadow' };
  m = /^\/contracts\/(.+)$/.exec(path);
  if (m) return { page: contractPage, id: decodeURIComponent(m[1]), section: 'contracts' };
  return null;
}

let current: View | null = null;
const main = document.getElementById('main') as HTMLElement;

const ctx: Ctx = {
  main,
  navigate(url, opts = {}) {
    if (opts.replace) history.replaceState(null, '', url);
    else history.pushState(null, '', url);
    render(!opts.replace);
  },
  setTitle(title) {
    document.title = `${title} · topology-audit`;
  },
};

function render(moveFocus: boolean): void {
  current?.dispose?.();
  current = null;
  const m = match(location.pathname);
  document.querySelectorAll('.topbar nav a').forEach((a) => {
    if (m && a.getAttribute('data-section') === m.section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  });
  main.replaceChildren();
  if (!m) {
    ctx.setTitle('Not found');
    const p = document.createElement('p');
    p.textContent = 'No such page. ';
    const a = document.createElement('a');
    a.href = '/';
    a.textContent = 'Back to the runs';
    p.append(a);
    main.append(p);
    return;
  }
  current = m.page(ctx, { id: m.id, query: new URLSearchParams(location.search) });
  if (moveFocus) main.focus({ preventScroll: false });
}

// Same-origin links navigate in place; modified clicks, new tabs and downloads keep the browser's behaviour.
document.addEventListener('click', (ev) => {
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const a = (ev.target as Element | null)?.closest?.('a[href]') as HTMLAnchorElement | null;
  if (!a || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !match(url.pathname)) return;
  ev.preventDefault();
  if (url.pathname + url.search === location.pathname + location.search) return;
  ctx.navigate(url.pathname + url.search + url.hash);
});
window.addEventListener('popstate', () => render(false));

// Live updates.
const live = document.getElementById('live') as HTMLElement;
function setLive(state: 'live' | 'reconnecting' | 'connecting'): void {
  live.setAttribute('data-state', state);
  live.textContent = state === 'live' ? 'Live' : state === 'reconnecting' ? 'Reconnecting…' : 'Connecting…';
}
let dropped = false;
// A visible banner while the event stream is down: what is on screen may be stale since the last good moment.
const stale = document.createElement('div');
stale.id = 'stale-banner';
stale.className = 'stale-banner';
stale.setAttribute('role', 'alert');
stale.hidden = true;
main.before(stale);
let lastLive = Date.now();
function showStale(): void {
  if (!stale.hidden) return;
  const t = new Date(lastLive);
  const hhmm = `${String(t.getHours()).padStart(2, '0')}:${String(t.getMinutes()).padStart(2, '0')}`;
  stale.textContent = `Data may be stale since ${hhmm}: the live connection to the auditor dropped. Reconnecting…`;
  stale.hidden = false;
}
const events = new EventSource('/ui/events');
events.addEventListener('open', () => {
  setLive('live');
  stale.hidden = true;
  lastLive = Date.now();
  if (dropped) current?.onRefresh?.();
  dropped = false;
});
events.addEventListener('error', () => {
  if (!dropped) lastLive = Date.now();
  dropped = true;
  setLive('reconnecting');
  showStale();
});
events.addEventListener('message', () => (lastLive = Date.now()));
events.addEventListener('run', (ev) => {
  lastLive = Date.now();
  try {
    current?.onRun?.(JSON.parse((ev as MessageEvent<string>).data) as RunRow);
  } catch {
    /* a malformed event is ignored */
  }
});
events.addEventListener('refresh', () => current?.onRefresh?.());
window.addEventListener('pagehide', () => events.close());

setInterval(() => tick(), 1000);
render(false);
