/**
 * SVG of an overlay from its layout. Presentation attributes only (no inline style), so the same markup works
 * under a strict Content-Security-Policy in the web view and as a standalone file from `diff --format svg`.
 */
import { FONT_SIZE, LINE_HEIGHT, textWidth, type GraphLayout, type Point } from './layout.js';
import { LOOKS, edgeLabelLines, edgeLook, edgeSentence, type EdgeLook } from './labels.js';
import type { Overlay, OverlayEdge } from './overlay.js';

export const FONT_FAMILY = "Inter, 'Segoe UI', system-ui, -apple-system, Roboto, 'Helvetica Neue', Arial, 'DejaVu Sans', sans-serif";

export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!);
}

const n = (x: number) => String(Math.round(x * 10) / 10);

/** An orthogonal polyline with rounded corners. */
export function roundedPath(points: Point[], radius = 7): string {
  if (points.length === 0) return '';
  let d = `M${n(points[0].x)} ${n(points[0].y)}`;
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i - 1];
    const c = points[i];
    const q = points[i + 1];
    const lin = Math.hypot(c.x - p.x, c.y - p.y);
    const lout = Math.hypot(q.x - c.x, q.y - c.y);
    const r = Math.min(radius, lin / 2, lout / 2);
    if (r < 0.5) {
      d += ` L${n(c.x)} ${n(c.y)}`;
      continue;
    }
    const a = { x: c.x - ((c.x - p.x) / lin) * r, y: c.y - ((c.y - p.y) / lin) * r };
    const b = { x: c.x + ((q.x - c.x) / lout) * r, y: c.y + ((q.y - c.y) / lout) * r };
    d += ` L${n(a.x)} ${n(a.y)} Q${n(c.x)} ${n(c.y)} ${n(b.x)} ${n(b.y)}`;
  }
  const last = points[points.length - 1];
  return `${d} L${n(last.x)} ${n(last.y)}`;
}

export interface SvgOptions {
  /** Evaluation time for countdowns (defaults to the overlay's). */
  now?: number;
  /** Prefix for element ids, so several graphs can share a page. */
  idPrefix?: string;
  /** A file of its own: XML declaration, white background, heading and legend. */
  standalone?: boolean;
  /** Accessible name of the graph. */
  title?: string;
  /** Heading lines drawn above the graph (standalone only). */
  heading?: string[];
}

const LABEL_FILL: Partial<Record<EdgeLook, string>> = { forbidden: '#fef2f2', over_max: '#fff7ed', late: '#fff1f2', waiting: '#fefce8' };

function marker(prefix: string, look: EdgeLook): string {
  const { color } = LOOKS[look];
  return `<marker id="${prefix}arrow-${look}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0 0.5 L10 5 L0 9.5 z" fill="${color}"/></marker>`;
}

function labelSvg(e: OverlayEdge, box: { x: number; y: number; width: number; height: number }, look: EdgeLook, now: number | undefined): string {
  const [head, detail] = edgeLabelLines(e, now);
  const style = LOOKS[look];
  const cx = box.x + box.width / 2;
  const y1 = box.y + 4 + FONT_SIZE.label;
  const y2 = y1 + LINE_HEIGHT;
  const parts = detail.split(' · ');
  const hasCountdown = e.deadline !== undefined && now !== undefined && /(left|ago)$/.test(parts[parts.length - 1]);
  const plain = hasCountdown ? parts.slice(0, -1) : parts;
  const countdown = hasCountdown
    ? `${plain.length ? ' · ' : ''}<tspan class="countdown" data-deadline="${e.deadline}">${escapeXml(parts[parts.length - 1])}</tspan>`
    : '';
  return (
    `<rect class="edge-label-bg" x="${n(box.x)}" y="${n(box.y)}" width="${n(box.width)}" height="${n(box.height)}" rx="5" fill="${LABEL_FILL[look] ?? '#ffffff'}" stroke="${style.color}" stroke-opacity="${look === 'allowed' ? 0.45 : 0.7}" stroke-width="1"/>` +
    `<text x="${n(cx)}" y="${n(y1)}" text-anchor="middle" font-size="${FONT_SIZE.label}" font-weight="650" fill="${look === 'allowed' ? '#64748b' : style.color}">${escapeXml(head)}</text>` +
    `<text x="${n(cx)}" y="${n(y2)}" text-anchor="middle" font-size="${FONT_SIZE.label}" fill="#475569">${escapeXml(plain.join(' · '))}${countdown}</text>`
  );
}

/** Legend entries for the looks present in a graph (or all). */
export function legendLooks(o: Overlay | null): EdgeLook[] {
  const all = Object.keys(LOOKS) as EdgeLook[];
  if (!o) return all;
  const present = new Set(o.edges.map(edgeLook));
  return all.filter((l) => present.has(l));
}

/** Render an overlay and its layout as SVG markup. */
export function renderSvg(o: Overlay, layout: GraphLayout, opts: SvgOptions = {}): string {
  const prefix = opts.idPrefix ?? 'g-';
  const now = opts.now ?? o.now;
  const standalone = opts.standalone ?? false;
  const heading = standalone ? opts.heading ?? [] : [];
  const top = heading.length ? 18 + heading.length * 20 : 0;
  const looks = standalone ? legendLooks(o) : [];
  const legendRows = Math.ceil(looks.length / 2);
  const legendH = looks.length ? 24 + legendRows * 20 : 0;
  const width = Math.max(layout.width, standalone ? 640 : 0, ...heading.map((h, i) => textWidth(h, i === 0 ? 15 : 12.5) + 32));
  const height = layout.height + top + legendH;
  const title = opts.title ?? `Topology of ${o.contract}@${o.version} phase ${o.phase}${o.run ? ` with run ${o.run} laid over it` : ''}`;
  const byId = new Map(o.edges.map((e) => [e.id, e]));
  const nodes = new Map(o.nodes.map((x) => [x.id, x]));
  const out: string[] = [];
  if (standalone) out.push('<?xml version="1.0" encoding="UTF-8"?>\n');
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="topology-graph" viewBox="0 0 ${n(width)} ${n(height)}" width="${n(width)}" height="${n(height)}" role="group" aria-label="${escapeXml(title)}" font-family="${escapeXml(FONT_FAMILY)}">`,
    `<title>${escapeXml(title)}</title>`,
    `<defs>${(Object.keys(LOOKS) as EdgeLook[]).map((l) => marker(prefix, l)).join('')}</defs>`,
  );
  if (standalone) out.push(`<rect x="0" y="0" width="${n(width)}" height="${n(height)}" fill="#ffffff"/>`);
  heading.forEach((line, i) =>
    out.push(`<text x="16" y="${24 + i * 20}" font-size="${i === 0 ? 15 : 12.5}" font-weight="${i === 0 ? 650 : 400}" fill="${i === 0 ? '#0f172a' : '#475569'}">${escapeXml(line)}</text>`),
  );
  out.push(`<g transform="translate(0 ${top})">`);
  // Quiet edges first, loud ones last (drawn on top).
  const order: EdgeLook[] = ['allowed', 'expected', 'observed', 'absent', 'waiting', 'late', 'over_max', 'forbidden'];
  const placed = layout.edges
    .map((pe) => ({ pe, e: byId.get(pe.id)! }))
    .filter((x) => x.e)
    .sort((a, b) => order.indexOf(edgeLook(a.e)) - order.indexOf(edgeLook(b.e)));
  out.push('<g class="edges">');
  for (const { pe, e } of placed) {
    const look = edgeLook(e);
    const style = LOOKS[look];
    const sentence = edgeSentence(e, now);
    out.push(
      `<g class="edge look-${look}" data-edge="${escapeXml(e.id)}" data-states="${e.states.join(' ')}" data-count="${e.count}" tabindex="0" role="img" aria-label="${escapeXml(sentence)}">`,
      `<title>${escapeXml(sentence)}</title>`,
      `<path d="${roundedPath(pe.points)}" fill="none" stroke="${style.color}" stroke-width="${style.width}"${style.dash ? ` stroke-dasharray="${style.dash}"` : ''} stroke-linejoin="round" marker-end="url(#${prefix}arrow-${look})"/>`,
      pe.label ? labelSvg(e, pe.label, look, now) : '',
      '</g>',
    );
  }
  out.push('</g><g class="nodes">');
  for (const pn of layout.nodes) {
    const node = nodes.get(pn.id);
    if (!node) continue;
    const cx = pn.x + pn.width / 2;
    const aria = `agent ${node.id}${node.owner ? ', the owner' : ''}${node.known ? '' : ', unknown agent: not in the contract'}`;
    out.push(
      `<g class="node${node.known ? '' : ' unknown'}${node.owner ? ' owner' : ''}" data-agent="${escapeXml(node.id)}" role="img" aria-label="${escapeXml(aria)}">`,
      `<title>${escapeXml(aria)}</title>`,
      `<rect x="${n(pn.x)}" y="${n(pn.y)}" width="${n(pn.width)}" height="${n(pn.height)}" rx="9" fill="${node.known ? '#ffffff' : '#fef2f2'}" stroke="${node.known ? (node.owner ? '#0f172a' : '#334155') : '#c81e1e'}" stroke-width="${node.owner ? 2 : 1.5}"${node.known ? '' : ' stroke-dasharray="5 3"'}/>`,
      `<text x="${n(cx)}" y="${n(pn.y + (node.known ? pn.height / 2 + 4.5 : 22))}" text-anchor="middle" font-size="${FONT_SIZE.node}" font-weight="${node.owner ? 700 : 600}" fill="#0f172a">${escapeXml(node.id)}</text>`,
      node.known ? '' : `<text x="${n(cx)}" y="${n(pn.y + 40)}" text-anchor="middle" font-size="10.5" font-weight="600" fill="#c81e1e">unknown agent</text>`,
      '</g>',
    );
  }
  out.push('</g></g>');
  if (looks.length) {
    const y0 = top + layout.height + 8;
    out.push(`<g class="legend" transform="translate(16 ${y0})"><text x="0" y="10" font-size="11" font-weight="650" fill="#334155">Legend</text>`);
    looks.forEach((l, i) => {
      const col = i % 2;
      const row = Math.floor(i / 2);
      const x = col * Math.max(300, width / 2 - 8);
      const y = 24 + row * 20;
      const s = LOOKS[l];
      out.push(
        `<line x1="${x}" y1="${y - 4}" x2="${x + 34}" y2="${y - 4}" stroke="${s.color}" stroke-width="${s.width}"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''} marker-end="url(#${prefix}arrow-${l})"/>`,
        `<text x="${x + 44}" y="${y}" font-size="11" fill="#334155">${escapeXml(s.legend)}</text>`,
      );
    });
    out.push('</g>');
  }
  out.push('</svg>');
  if (standalone) out.push('\n');
  return out.join('');
}
