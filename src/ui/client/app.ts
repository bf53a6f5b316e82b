/**
 * The web view in the browser: client-side routing over real paths (links work without it too), one
 * server-sent event stream for live run updates, and a one-second tick for countdowns. Behind tokens
 * (serve --api-tokens) it first asks for a viewer or API token, which the server keeps as an HttpOnly session
 * cookie sent with every request and the event stream; a link from an alert lands on that question, then on its page.
 */
import type { RunRow } from '../view.js';
import { h, tick, UNAUTHORIZED_EVENT } from './dom.js';
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
function setLive(state: 'live' | 'reconnecting' | 'connecting' | 'signed-out'): void {
  live.setAttribute('data-state', state);
  live.textContent = state === 'live' ? 'Live' : state === 'reconnecting' ? 'Reconnecting…' : state === 'signed-out' ? 'Token needed' : 'Connecting…';
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

let events: EventSource | null = null;
function startLive(): void {
  if (events) return;
  const es = new EventSource('/ui/events');
  events = es;
  es.addEventListener('open', () => {
    setLive('live');
    stale.hidden = true;
    lastLive = Date.now();
    if (dropped) current?.onRefresh?.();
    dropped = false;
  });
  es.addEventListener('error', () => {
    if (!dropped) lastLive = Date.now();
    dropped = true;
    setLive('reconnecting');
    // A stream refused for its token is not a dropped connection: ask whether the session still holds.
    void sessionState().then((st) => {
      if (st && st.required && !st.signedIn) signIn('The token is no longer accepted.');
      else showStale();
    });
  });
  es.addEventListener('message', () => (lastLive = Date.now()));
  es.addEventListener('run', (ev) => {
    lastLive = Date.now();
    try {
      current?.onRun?.(JSON.parse((ev as MessageEvent<string>).data) as RunRow);
    } catch {
      /* a malformed event is ignored */
    }
  });
  es.addEventListener('refresh', () => current?.onRefresh?.());
}
function stopLive(): void {
  events?.close();
  events = null;
  dropped = false;
  stale.hidden = true;
}
window.addEventListener('pagehide', () => stopLive());

interface SessionState {
  required: boolean;
  signedIn: boolean;
}
async function sessionState(): Promise<SessionState | null> {
  try {
    const res = await fetch('/ui/session', { headers: { accept: 'application/json' }, credentials: 'same-origin' });
    return res.ok ? ((await res.json()) as SessionState) : null;
  } catch {
    return null;
  }
}

// Sign out, shown in the top bar while a token is kept.
const signOut = h('button', { type: 'button', class: 'signout', hidden: true }, 'Sign out');
live.after(signOut);
signOut.addEventListener('click', () => {
  void fetch('/ui/session', { method: 'DELETE', credentials: 'same-origin' }).then(() => signIn('Signed out.'));
});

/** The token question, in place of the page asked for (its address is kept, so an alert's link lands on its run). */
function signIn(note?: string): void {
  stopLive();
  current?.dispose?.();
  current = null;
  signOut.hidden = true;
  setLive('signed-out');
  ctx.setTitle('Token needed');
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': 'token-help' });
  const error = h('p', { class: 'form-error', role: 'alert' });
  const form = h(
    'form',
    { class: 'signin' },
    h('h1', {}, 'This auditor asks for a token'),
    note ? h('p', { class: 'muted' }, note) : null,
    h('p', { id: 'token-help' }, 'Paste a viewer token (serve --viewer-tokens) or an API token (serve --api-tokens). It is checked, then kept by the browser for this session only and sent with every request of this view; close the browser or sign out to forget it.'),
    h('label', { for: 'token' }, 'Token'),
    input,
    h('button', { type: 'submit' }, 'Open the view'),
    error,
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    error.textContent = '';
    void fetch('/ui/session', { method: 'POST', headers: { authorization: `Bearer ${token}`, accept: 'application/json' }, credentials: 'same-origin' }).then(
      async (res) => {
        if (res.ok) return start({ required: true, signedIn: true });
        const body = (await res.json().catch(() => ({}))) as { error?: string };
        error.textContent = body.error ?? `refused (HTTP ${res.status})`;
        input.select();
      },
      () => (error.textContent = 'The auditor cannot be reached.'),
    );
  });
  main.replaceChildren(form);
  input.focus();
}
// Any data request answered 401 (a token revoked, a session ended) brings the question back.
window.addEventListener(UNAUTHORIZED_EVENT, () => {
  void sessionState().then((st) => {
    if (!st || (st.required && !st.signedIn)) signIn('The token is no longer accepted.');
  });
});

function start(st: SessionState): void {
  signOut.hidden = !st.required;
  render(false);
  startLive();
}

setInterval(() => tick(), 1000);
void sessionState().then((st) => {
  if (st && st.required && !st.signedIn) signIn();
  else start(st ?? { required: false, signedIn: true });
});
