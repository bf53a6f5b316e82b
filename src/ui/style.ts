/** The web view's stylesheet and icon, served from the process (no external fonts or assets). */
import { HANDOFF_CSS } from './handoffs-style.js';

export const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#0f172a"/><path d="M9 11 L23 9 M9 11 L16 23 M23 9 L16 23" stroke="#94a3b8" stroke-width="2" fill="none"/><path d="M16 23 L23 9" stroke="#f87171" stroke-width="2.4"/><circle cx="9" cy="11" r="3.6" fill="#e2e8f0"/><circle cx="23" cy="9" r="3.6" fill="#86efac"/><circle cx="16" cy="23" r="3.6" fill="#e2e8f0"/></svg>`;

const VERDICT_COLORS: Record<string, [string, string, string]> = {
  // text, background, border
  uncertain: ['#5b21b6', '#f5f3ff', '#ddd6fe'],
  stale_contract: ['#6d28d9', '#faf5ff', '#e9d5ff'],
  unknown_agent: ['#991b1b', '#fef2f2', '#fecaca'],
  forbidden_edge: ['#b91c1c', '#fef2f2', '#fecaca'],
  ambiguous_route: ['#9a3412', '#fff7ed', '#fed7aa'],
  false_complete: ['#9f1239', '#fff1f2', '#fecdd3'],
  waiting: ['#854d0e', '#fefce8', '#fde68a'],
  incomplete: ['#9f1239', '#fff1f2', '#fecdd3'],
  working: ['#1e40af', '#eff6ff', '#bfdbfe'],
  healthy: ['#166534', '#f0fdf4', '#bbf7d0'],
};

const verdictRules = Object.entries(VERDICT_COLORS)
  .map(([v, [fg, bg, bd]]) => `.badge.v-${v}{color:${fg};background:${bg};border-color:${bd}}`)
  .join('\n');

export const STYLE_CSS = `
:root{
  --bg:#f5f6f8; --panel:#ffffff; --text:#0f172a; --muted:#5b6678; --faint:#8a94a6; --line:#e3e7ee; --line-strong:#cfd6e0;
  --accent:#2563eb; --accent-weak:#eff4ff; --focus:#2563eb; --radius:10px;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace;
  font-family: Inter, 'Segoe UI', system-ui, -apple-system, Roboto, 'Helvetica Neue', Arial, 'DejaVu Sans', sans-serif;
  color:var(--text); background:var(--bg); font-size:14px; line-height:1.45;
}
*{box-sizing:border-box}
body{margin:0;min-height:100vh}
a{color:var(--accent);text-decoration:none}
a:hover{text-decoration:underline}
:focus-visible{outline:3px solid var(--focus);outline-offset:2px;border-radius:4px}
.skip-link{position:absolute;left:-9999px;top:8px;background:#fff;padding:8px 12px;border-radius:6px;z-index:10}
.skip-link:focus{left:8px}
.topbar{background:#0f172a;color:#e2e8f0;border-bottom:1px solid #1e293b}
.topbar-inner{max-width:1320px;margin:0 auto;padding:0 24px;height:52px;display:flex;align-items:center;gap:28px}
.brand{display:flex;align-items:center;gap:10px;color:#f8fafc;font-weight:650;font-size:15px;letter-spacing:.01em}
.brand:hover{text-decoration:none}
.topbar nav{display:flex;gap:4px}
.topbar nav a{color:#cbd5e1;padding:6px 12px;border-radius:6px;font-weight:500}
.topbar nav a:hover{background:#1e293b;color:#fff;text-decoration:none}
.topbar nav a[aria-current="page"]{background:#1e293b;color:#fff}
.topbar :focus-visible{outline-color:#93c5fd}
.live{margin-left:auto;font-size:12.5px;color:#cbd5e1;display:flex;align-items:center;gap:7px}
.live::before{content:"";width:8px;height:8px;border-radius:50%;background:#64748b}
.live[data-state="live"]::before{background:#22c55e;box-shadow:0 0 0 3px rgba(34,197,94,.18)}
.live[data-state="reconnecting"]::before{background:#f59e0b}
main{max-width:1320px;margin:0 auto;padding:24px 24px 64px}
main:focus{outline:none}
h1{font-size:22px;line-height:1.25;margin:0;font-weight:650;letter-spacing:-.01em}
h2{font-size:15.5px;margin:0 0 12px;font-weight:650}
h3{font-size:14px;margin:0 0 8px;font-weight:650}
.muted{color:var(--muted)}
.faint{color:var(--faint)}
.mono{font-family:var(--mono);font-size:12.5px}
h1.mono{font-size:21px;font-weight:650;letter-spacing:-.02em}
.nowrap{white-space:nowrap}
.page-head{display:flex;align-items:flex-end;justify-content:space-between;gap:16px;margin-bottom:18px;flex-wrap:wrap}
.page-head p{margin:4px 0 0}
.crumbs{font-size:13px;color:var(--muted);margin-bottom:8px}
.crumbs a{color:var(--muted)}
.card{background:var(--panel);border:1px solid var(--line);border-radius:var(--radius);box-shadow:0 1px 2px rgba(15,23,42,.04)}
.card + .card, .section + .section{margin-top:18px}
.card-body{padding:18px 20px}
.card-head{display:flex;align-items:baseline;justify-content:space-between;gap:12px;padding:14px 20px;border-bottom:1px solid var(--line)}
.card-head h2{margin:0}
.shadow-candidate{padding:14px 20px;overflow-wrap:anywhere}
.shadow-candidate > table{width:100%}
.shadow-edges .mono{overflow-wrap:anywhere}
.run-shadow .card-body{padding:0 20px;margin:12px 0}
.run-shadow ul.card-body{padding-left:38px;overflow-wrap:anywhere}
.card-head .count{color:var(--muted);font-weight:500;font-size:13px}
.badge{display:inline-flex;align-items:center;gap:5px;padding:2px 9px;border-radius:999px;border:1px solid var(--line-strong);font-size:12px;font-weight:600;white-space:nowrap;background:#f8fafc;color:#334155}
.badge.big{font-size:14px;padding:4px 12px}
${verdictRules}
.badge.n-green{color:#166534;background:#f0fdf4;border-color:#bbf7d0}
.badge.n-red{color:#991b1b;background:#fef2f2;border-color:#fecaca}
.badge.settled{color:#334155;background:#f1f5f9}
.badge.retired{color:#6d28d9;background:#faf5ff;border-color:#e9d5ff}
.chips{display:flex;flex-wrap:wrap;gap:8px;margin-bottom:14px}
.chip{display:inline-flex;align-items:center;gap:8px;padding:5px 10px 5px 12px;border:1px solid var(--line);border-radius:8px;background:var(--panel);color:var(--text);font:inherit;font-size:12.5px;cursor:pointer}
.chip:hover{border-color:var(--line-strong);background:#f8fafc}
.chip[aria-pressed="true"]{border-color:var(--accent);background:var(--accent-weak);box-shadow:inset 0 0 0 1px var(--accent)}
.chip .n{font-weight:650;min-width:1.4em;text-align:right;font-variant-numeric:tabular-nums}
.chip.zero{color:var(--faint)}
.filters{display:flex;gap:16px;align-items:flex-end;flex-wrap:wrap;padding:14px 20px;border-bottom:1px solid var(--line)}
.filters label{display:flex;flex-direction:column;gap:4px;font-size:12px;font-weight:600;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
select{font:inherit;font-size:13.5px;text-transform:none;letter-spacing:0;color:var(--text);padding:6px 30px 6px 10px;border:1px solid var(--line-strong);border-radius:7px;background:#fff;min-width:200px}
.filters .summary{margin-left:auto;color:var(--muted);font-size:13px;padding-bottom:6px}
button.link{background:none;border:none;color:var(--accent);font:inherit;cursor:pointer;padding:0}
.table-wrap{overflow-x:auto}
table{width:100%;border-collapse:collapse;font-size:13.5px}
th{text-align:left;font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:600;background:#f8fafc;padding:9px 14px;border-bottom:1px solid var(--line);white-space:nowrap}
td{padding:10px 14px;border-top:1px solid var(--line);vertical-align:top}
tbody tr:first-child td{border-top:none}
tbody tr:hover td{background:#fafbfc}
td.run{white-space:nowrap}
td.run a{font-weight:600;font-family:var(--mono);font-size:13px}
td.msg{color:#334155;max-width:520px}
td.time{white-space:nowrap;color:var(--muted);font-variant-numeric:tabular-nums}
tr.flash td{animation:flash 1.6s ease-out}
@keyframes flash{from{background:#fef9c3}to{background:transparent}}
@media (prefers-reduced-motion: reduce){tr.flash td{animation:none}}
.empty{padding:36px 20px;text-align:center;color:var(--muted)}
.summary-grid{display:grid;grid-template-columns:minmax(0,1.4fr) minmax(0,1fr) minmax(0,1fr);gap:0}
.summary-grid > div{padding:16px 20px;border-left:1px solid var(--line)}
.summary-grid > div:first-child{border-left:none}
.summary-grid .label{font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:600;margin-bottom:6px}
.summary-grid .value{display:flex;align-items:center;gap:8px;flex-wrap:wrap}
.summary-grid p{margin:8px 0 0;color:#334155;font-size:13px}
dl.facts{display:grid;grid-template-columns:auto 1fr;gap:4px 14px;margin:0;font-size:13px}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0}
.graph-panel{overflow:auto;background:#fbfcfd;border-bottom:1px solid var(--line);padding:12px}
.graph-panel svg{display:block;margin:0 auto;max-width:100%;height:auto}
svg.topology-graph g.edge{cursor:default}
svg.topology-graph g.edge:focus{outline:none}
svg.topology-graph g.edge:focus-visible .edge-label-bg,svg.topology-graph g.edge:hover .edge-label-bg{stroke:#2563eb;stroke-width:2.5px;stroke-opacity:1}
svg.topology-graph g.edge:focus-visible path,svg.topology-graph g.edge:hover path{stroke-width:3.5px}
.legend{display:flex;flex-wrap:wrap;gap:8px 22px;padding:12px 20px;font-size:12.5px;color:#334155;border-bottom:1px solid var(--line)}
.legend span{display:inline-flex;align-items:center;gap:8px}
.legend svg{flex:none}
.states{display:flex;gap:4px;flex-wrap:wrap}
.state{font-size:11.5px;padding:1px 7px;border-radius:5px;background:#f1f5f9;color:#334155;border:1px solid #e2e8f0;white-space:nowrap}
.state.s-forbidden{background:#fef2f2;color:#991b1b;border-color:#fecaca}
.state.s-over_max{background:#fff7ed;color:#9a3412;border-color:#fed7aa}
.state.s-late{background:#fff1f2;color:#9f1239;border-color:#fecdd3}
.state.s-waiting{background:#fefce8;color:#854d0e;border-color:#fde68a}
.state.s-absent{background:#f8fafc;color:#334155;border-color:#cbd5e1;border-style:dashed}
.state.s-observed{background:#f0fdf4;color:#166534;border-color:#bbf7d0}
.edge-key{font-family:var(--mono);font-size:12.5px;white-space:nowrap}
.finding-list{list-style:none;margin:0;padding:0}
.finding{display:grid;grid-template-columns:170px minmax(0,1fr);gap:14px;padding:14px 20px;border-top:1px solid var(--line)}
.finding:first-child{border-top:none}
.finding .what{font-size:13.5px;color:#1e293b}
.finding .meta{display:flex;flex-wrap:wrap;gap:6px 16px;margin-top:6px;font-size:12.5px;color:var(--muted)}
.finding .code{font-family:var(--mono);font-size:12px;color:var(--muted);margin-top:4px}
.timeline{list-style:none;margin:0;padding:6px 0}
.timeline li{display:grid;grid-template-columns:108px 74px 92px minmax(0,1fr) auto;gap:12px;align-items:baseline;padding:7px 20px;font-size:13px;position:relative}
.timeline li + li{border-top:1px solid #f1f3f6}
.timeline li.cited{background:#fffbeb}
.timeline li.new{animation:flash 1.6s ease-out}
.timeline .t{font-variant-numeric:tabular-nums;color:#334155;font-family:var(--mono);font-size:12px}
.timeline .off{font-variant-numeric:tabular-nums;color:var(--faint);font-family:var(--mono);font-size:12px}
.timeline .type{font-weight:600;font-size:12px}
.timeline .ev{font-family:var(--mono);font-size:12px;color:var(--muted)}
.countdown{font-variant-numeric:tabular-nums}
.legend-card{margin-bottom:18px}
.legend-card .legend{border-bottom:none}
.versions > .card{margin-top:0}
.versions{display:grid;align-items:start;grid-auto-flow:column;grid-auto-columns:minmax(520px,1fr);gap:18px;overflow-x:auto;padding-bottom:8px}
.version .card-head{align-items:center}
.changes{padding:12px 20px;border-bottom:1px solid var(--line);background:#fbfcfd;font-size:13px}
.changes h3{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);margin:0 0 6px}
.changes ul{list-style:none;margin:0;padding:0}
.changes li{padding:2px 0}
.chg{display:inline-block;width:1.3em;font-weight:700}
.chg.add{color:#15803d}.chg.del{color:#b91c1c}.chg.mod{color:#a16207}
.phase + .phase{border-top:1px solid var(--line)}
.phase-head{display:flex;gap:10px;align-items:center;padding:12px 20px 0}
.plan{margin:8px 20px 12px;padding-left:20px;font-size:13px}
.plan li{margin:2px 0}
.kv{padding:12px 20px;border-bottom:1px solid var(--line);font-size:13px;display:grid;grid-template-columns:90px 1fr;gap:6px 12px}
.kv .k{color:var(--muted)}
.list-plain{list-style:none;margin:0;padding:0}
.noscript{max-width:640px;margin:40px auto;padding:16px;background:#fff;border:1px solid var(--line);border-radius:8px}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.stale-banner{background:#fef3c7;color:#78350f;border-bottom:1px solid #f59e0b;padding:10px 24px;font-weight:600;text-align:center}
.stale-banner[hidden]{display:none}
.live[data-state="signed-out"]::before{background:#ef4444}
.signout{margin-left:10px;font:inherit;font-size:12.5px;background:transparent;color:#cbd5e1;border:1px solid #475569;border-radius:6px;padding:3px 9px;cursor:pointer}
.signout[hidden]{display:none}
.signin{max-width:520px;display:flex;flex-direction:column;gap:10px}
.signin input{font:inherit;padding:8px 10px;border:1px solid #94a3b8;border-radius:6px;width:100%;box-sizing:border-box}
.signin button{align-self:flex-start;font:inherit;font-weight:600;padding:8px 16px;border-radius:6px;border:0;background:#1d4ed8;color:#fff;cursor:pointer}
.since{font-size:12.5px;color:#475569;margin-top:4px}
.when .abs{white-space:nowrap}
.when .rel{white-space:nowrap}
td .when .abs,td .when .rel{display:block}
td.msg{min-width:220px}
td.time .updated{display:block;font-size:12px}
.states{display:flex;flex-wrap:wrap;gap:4px}
.state{display:inline-block;font-size:12px;font-weight:600;padding:1px 7px;border-radius:999px;border:1px solid}
.state.s-alerting{background:#fef2f2;color:#991b1b;border-color:#fca5a5}
.state.s-acked{background:#eff6ff;color:#1e40af;border-color:#93c5fd}
.state.s-silenced{background:#f5f3ff;color:#5b21b6;border-color:#c4b5fd}
.timeline .d{display:block;font-size:11.5px;color:#64748b}
.form-error{color:#b91c1c;font-weight:600;min-height:1.2em;margin:0}
@media (max-width: 640px){
.topbar-inner{padding:0 12px;gap:12px;height:auto;min-height:52px;flex-wrap:wrap}
.topbar nav a{padding:6px 8px}
main{padding-left:12px!important;padding-right:12px!important}
table.cards-narrow,table.cards-narrow tbody,table.cards-narrow tr,table.cards-narrow td{display:block;width:auto}
table.cards-narrow thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
table.cards-narrow tr{border:1px solid var(--line);border-radius:8px;margin:10px;padding:8px 10px}
table.cards-narrow td{border:none;padding:3px 0;white-space:normal;overflow-wrap:anywhere}
table.cards-narrow td::before{content:attr(data-label);display:block;font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted,#64748b)}
.table-wrap{overflow-x:visible}
.graph-panel{overflow:auto;-webkit-overflow-scrolling:touch}
.graph-panel svg{max-width:none;min-width:560px;margin:0}
.filters{flex-wrap:wrap}
.page-head{flex-wrap:wrap}
.versions{grid-auto-flow:row;grid-template-columns:minmax(0,1fr);grid-auto-columns:auto;overflow-x:visible}
.versions .card{min-width:0;overflow-wrap:anywhere}
.kv{grid-template-columns:72px minmax(0,1fr)}
.kv .edge-key{white-space:normal;overflow-wrap:anywhere}
}
@media (max-width: 900px){.summary-grid{grid-template-columns:1fr}.summary-grid > div{border-left:none;border-top:1px solid var(--line)}.timeline li{grid-template-columns:90px 1fr;}.finding{grid-template-columns:1fr}}
${HANDOFF_CSS}
`;
