/** Browser helpers of the web view: element building (text only, never HTML from data), formatting, clocks. */

export type Child = Node | string | number | null | undefined | false | Child[];
type Attr = string | number | boolean | null | undefined | ((ev: Event) => void);

function append(el: Element, c: Child): void {
  if (c === null || c === undefined || c === false) return;
  if (Array.isArray(c)) for (const x of c) append(el, x);
  else if (c instanceof Node) el.appendChild(c);
  else el.appendChild(document.createTextNode(String(c)));
}

function setAttrs(el: Element, attrs: Record<string, Attr>): void {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (typeof v === 'function') el.addEventListener(k.replace(/^on/, ''), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

/** Build an HTML element. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, Attr> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Build an SVG element. */
export function s(tag: string, attrs: Record<string, Attr> = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Difference between the server's clock and this browser's (ms), learnt from each answer. */
let skew = 0;
export function learnServerTime(iso: string): void {
  const t = Date.parse(iso);
  if (!Number.isNaN(t)) skew = t - Date.now();
}
export const serverNow = (): number => Date.now() + skew;

/** "2m30s", like the server's wording. */
export function dur(ms: number): string {
  let rest = Math.abs(Math.round(ms));
  if (rest < 1000) return `${rest}ms`;
  const parts: string[] = [];
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.slice(0, 2).join('');
}

export const deadlineWords = (deadline: number, now: number) => (now < deadline ? `${dur(deadline - now)} left` : `deadline passed ${dur(now - deadline)} ago`);

export function ago(iso: string | null, now = serverNow()): string {
  if (!iso) return '–';
  const d = now - Date.parse(iso);
  if (d < 5000 && d > -5000) return 'just now';
  return d >= 0 ? `${dur(d)} ago` : `in ${dur(-d)}`;
}

/** "10:12:05" in UTC, with milliseconds when they are not zero. */
export function clock(iso: string): string {
  const d = new Date(iso);
  const t = d.toISOString().slice(11, 23);
  return t.endsWith('.000') ? t.slice(0, 8) : t;
}

export const utc = (iso: string) => new Date(iso).toISOString().replace('T', ' ').replace(/\.000Z$/, 'Z');

/** A relative time that stays current (refreshed by tick()). */
export const agoEl = (iso: string | null) => h('time', { datetime: iso ?? undefined, title: iso ? utc(iso) : undefined, 'data-ago': iso ?? undefined }, ago(iso));

/** "2026-01-15 10:12:05 UTC": a date and time anyone can place, whatever day it is now. */
export const utcDateTime = (iso: string) => `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`;

/** The browser's local time of an instant, with its zone, for the hover title. */
const localDateTime = (iso: string) => {
  const d = new Date(iso);
  return `${d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' })} (your time)`;
};

/** An absolute time with its date (UTC; local on hover), and how long ago it was (kept current by tick()). */
export const whenEl = (iso: string | null) =>
  iso
    ? h('time', { class: 'when', datetime: iso, title: localDateTime(iso) }, h('span', { class: 'abs' }, utcDateTime(iso)), ' ', h('span', { class: 'rel faint', 'data-ago': iso }, ago(iso)))
    : h('span', { class: 'faint' }, '–');

/** A countdown that stays current. */
export const countdownEl = (deadlineIso: string) => {
  const ms = Date.parse(deadlineIso);
  return h('span', { class: 'countdown', 'data-deadline': ms, title: `deadline ${utc(deadlineIso)}` }, deadlineWords(ms, serverNow()));
};

/** Refresh every countdown and relative time on the page. */
export function tick(root: ParentNode = document): void {
  const now = serverNow();
  root.querySelectorAll<Element>('[data-deadline]').forEach((el) => {
    const d = Number(el.getAttribute('data-deadline'));
    if (Number.isFinite(d)) el.textContent = deadlineWords(d, now);
  });
  root.querySelectorAll<Element>('[data-ago]').forEach((el) => {
    el.textContent = ago(el.getAttribute('data-ago'), now);
  });
}

export const verdictBadge = (verdict: string, big = false) => h('span', { class: `badge v-${verdict}${big ? ' big' : ''}` }, verdict);
export const naiveBadge = (naive: string, big = false) => h('span', { class: `badge n-${naive}${big ? ' big' : ''}` }, `naive: ${naive}`);

export const runHref = (run: string) => `/runs/${encodeURIComponent(run)}`;
export const contractHref = (id: string) => `/contracts/${encodeURIComponent(id)}`;

export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** Dispatched on window when a data request is answered 401: the view asks for a token again (app.ts). */
export const UNAUTHORIZED_EVENT = 'topology-audit:unauthorized';

/** GET JSON from the server (same origin only; the session cookie holds the token behind --api-tokens). */
export async function getJson<T>(url: string, signal?: AbortSignal): Promise<T> {
  const res = await fetch(url, { headers: { accept: 'application/json' }, signal, credentials: 'same-origin' });
  if (res.status === 401) window.dispatchEvent(new Event(UNAUTHORIZED_EVENT));
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new HttpError(res.status, (body as { error?: string }).error ?? `HTTP ${res.status}`);
  const now = (body as { now?: string }).now;
  if (typeof now === 'string') learnServerTime(now);
  return body as T;
}

/** A legend swatch: a short line in the edge's look. */
export function swatch(color: string, width: number, dash: string): SVGElement {
  return s(
    'svg',
    { width: 36, height: 10, viewBox: '0 0 36 10', 'aria-hidden': 'true', focusable: 'false' },
    s('line', { x1: 1, y1: 5, x2: 28, y2: 5, stroke: color, 'stroke-width': width, 'stroke-dasharray': dash || undefined }),
    s('path', { d: 'M27 1 L35 5 L27 9 z', fill: color }),
  );
}

/** A legend swatch for a node style. */
export function nodeSwatch(color: string, dash: string): SVGElement {
  return s(
    'svg',
    { width: 36, height: 14, viewBox: '0 0 36 14', 'aria-hidden': 'true', focusable: 'false' },
    s('rect', { x: 2, y: 1.5, width: 32, height: 11, rx: 3, fill: '#fef2f2', stroke: color, 'stroke-width': 1.5, 'stroke-dasharray': dash || undefined }),
  );
}

export function legendEl(entries: { look: string; color: string; width: number; dash: string; text: string }[]): HTMLElement {
  return h(
    'div',
    { class: 'legend', role: 'list', 'aria-label': 'Legend' },
    entries.map((e) => h('span', { role: 'listitem', 'data-look': e.look }, e.look === 'unknown_agent' ? nodeSwatch(e.color, e.dash) : swatch(e.color, e.width, e.dash), e.text)),
  );
}

export function stateChips(states: string[]): HTMLElement {
  return h('span', { class: 'states' }, states.map((st) => h('span', { class: `state s-${st}` }, st.replace('_', ' '))));
}

/** Debounce with at most one call in flight. */
export function coalesce(fn: () => Promise<void>, ms: number): () => void {
  let timer: number | null = null;
  let running = false;
  let again = false;
  const run = async () => {
    timer = null;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      await fn();
    } finally {
      running = false;
      if (again) {
        again = false;
        schedule();
      }
    }
  };
  const schedule = () => {
    if (timer === null) timer = window.setTimeout(run, ms);
  };
  return schedule;
}
