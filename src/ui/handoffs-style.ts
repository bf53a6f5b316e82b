/** Styles of the run page's Handoffs panel (src/ui/client/handoffs.ts); appended to the web view's stylesheet. */
export const HANDOFF_CSS = `
.ho-facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(180px,1fr));gap:10px 18px;padding:14px 20px;border-bottom:1px solid var(--line);font-size:13px;margin:0}
.ho-facts dt{color:var(--muted);font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;font-weight:600}
.ho-facts dd{margin:2px 0 0;font-family:var(--mono);font-size:12.5px;overflow-wrap:anywhere}
.ho-branches{list-style:none;margin:0;padding:0}
.ho-branch{padding:12px 20px;border-top:1px solid var(--line)}
.ho-branch:first-child{border-top:none}
.ho-branch[data-live="true"]{box-shadow:inset 3px 0 0 #2563eb}
.ho-branch[data-conflict="true"]{background:#fff7ed;box-shadow:inset 3px 0 0 #ea580c}
.ho-branch .ho-title{display:flex;flex-wrap:wrap;align-items:center;gap:6px 10px}
.ho-branch .ho-id{font-family:var(--mono);font-weight:650;font-size:13px;overflow-wrap:anywhere}
.ho-branch dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 12px;margin:8px 0 0;font-size:12.5px}
.ho-branch dt{color:var(--muted)}
.ho-branch dd{margin:0;overflow-wrap:anywhere}
.badge.ho-live{color:#1e40af;background:#eff6ff;border-color:#bfdbfe}
.badge.ho-warn{color:#9a3412;background:#fff7ed;border-color:#fed7aa}
.badge.ho-bad{color:#9f1239;background:#fff1f2;border-color:#fecdd3}
.badge.ho-ok{color:#166534;background:#f0fdf4;border-color:#bbf7d0}
.ho-section{padding:12px 20px;border-top:1px solid var(--line);font-size:13px}
.ho-section h3{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);margin:0 0 6px}
.ho-section ul{margin:0;padding-left:18px}
.ho-conflict{background:#fff7ed;border:1px solid #fed7aa;border-radius:6px;padding:6px 10px;margin:4px 0;list-style:none;overflow-wrap:anywhere}
.ho-budget{width:100%;max-width:560px;font-size:12.5px}
.ho-budget th,.ho-budget td{padding:5px 8px;text-align:right;font-variant-numeric:tabular-nums}
.ho-budget th:first-child,.ho-budget td:first-child{text-align:left}
.ho-budget tr.ho-over td{color:#9f1239;font-weight:650}
`;
