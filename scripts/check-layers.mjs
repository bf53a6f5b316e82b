#!/usr/bin/env node
// The layering of src/, checked (the receipt emitter is its own package, packages/emitter, importing only the shared
// receipt package @topology-audit/receipt, itself pure: packages/receipt): which folder may import which, core stays pure, no cycles between folders,
// no cycles between files, and no file outside src/core imports a module internal to the core (CORE_INTERNAL).
// Usage: node scripts/check-layers.mjs [ROOT]   (exit 0 clean, 1 with one line per violation)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/** Folder -> folders it may import (its own files always). `*` = any folder. */
export const LAYERS = {
  core: [], // the verdict: pure, imports no other folder
  otlp: [],
  propose: ['core'],
  ingest: ['core', 'otlp'],
  store: ['core'],
  handoff: ['core'], // admission, return, board: pure (the handoff verdict rules live in core/rules/handoff)
  experiment: ['core', 'handoff'],
  metrics: ['core', 'ingest'],
  audit: ['core', 'handoff', 'store', 'ingest', 'otlp'], // the live engine: append -> fold -> pin -> evaluate
  render: ['core', 'handoff'],
  alerting: ['core'], // per-run alerts to Alertmanager, silences read back (pure alert construction + HTTP at the edge)
  ui: ['core', 'handoff', 'render', 'audit', 'alerting'], // never server
  cluster: ['core', 'store', 'audit'], // several auditors on one shared PostgreSQL store: leases, takeover, tail
  server: ['core', 'otlp', 'ingest', 'store', 'audit', 'cluster', 'metrics', 'handoff', 'alerting'], // transports; never ui or render
  cli: ['*'], // the only folder that composes the server with the UI
};
/**
 * Modules of src/core that only src/core may import (paths relative to src/core; a trailing "/" is a folder): the
 * verdict rules and the core's building blocks. Other folders import the core's public modules, all of which
 * src/core/index.ts re-exports (the handoff audit through src/core/handoffs.ts).
 */
export const CORE_INTERNAL = ['rules/', 'obs.ts', 'idset.ts', 'sha256.ts', 'receipt-schema.ts', 'vocab.ts'];
/**
 * The cluster's coordination (issue 48): its SQL (leases, the heartbeat in `instances`) lives in src/cluster/, beside
 * the store and not in it. Outside src/cluster/ no statement writes the `leases` or `instances` table, and only the
 * fence check inside the store's owner writes reads `leases` (COORDINATION_SQL_OK: the migrations create and seed
 * them; the fence's CTE). Comments may name them.
 */
export const COORDINATION_WRITE = /\b(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+(leases|instances)\b/i;
export const LEASE_READ = /\b(?:FROM|JOIN)\s+(leases)\b/i;
export const COORDINATION_SQL_OK = { write: ['store/pg/schema.ts'], read: ['store/pg/schema.ts', 'store/pg/fence.ts'] };
/**
 * The storage seam (issue 48): which backend runs is known only to the storage folder and serve's composition (and
 * to src/cluster/: its leases, heartbeat and tail are statements on the PostgreSQL store's pool).
 * Elsewhere no code names a backend class or imports a database driver; nowhere is a store tested with `instanceof`.
 */
export const BACKEND_NAMES = /\b(ReceiptStore|PgStore|SqlitePort|PgPort|ClusterEngineStore)\b/;
export const BACKEND_PACKAGES = ['better-sqlite3', 'pg', 'pg-pool'];
export const BACKEND_AWARE = ['store/', 'server/serve.ts', 'cluster/'];
const STORE_INSTANCEOF = /\binstanceof\s+(ReceiptStore|PgStore|SqlitePort|PgPort|ClusterEngineStore|\w*Store\b)/;
/**
 * A store's kind inferred from the methods it has (`typeof store.listRuns === 'function'`, `'runReceipts' in store`,
 * `if (store.runReceipts)`): outside src/store a caller asks the store's declared capabilities (e.g. the engine's
 * `synchronousReads`), never probes for a method.
 */
const STORE_PROBE = /\btypeof\s+[\w.]*store\??\.\w+\s*[!=]==?\s*['"]function['"]|['"]\w+['"]\s+in\s+[\w.]*store\b|\bstore\??\.runReceipts\b(?!\s*[(<])/i;
/**
 * Packages a pure folder may import (no node: built-ins, no I/O). @topology-audit/receipt (packages/receipt, the
 * receipt shapes and ids) may be among them because it is pure too: its files import only zod and each other
 * (checked below).
 */
export const PURE = { core: ['zod', 'yaml', '@topology-audit/receipt'], handoff: ['zod', 'yaml'] };
/** What the shared receipt package may import: its own files and these packages. */
export const RECEIPT_PACKAGE_PURE = ['zod'];

const root = resolve(process.argv[2] ?? '.');
const src = join(root, 'src');
const files = [];
(function walk(d) {
  for (const n of readdirSync(d)) {
    const p = join(d, n);
    if (statSync(p).isDirectory()) walk(p);
    else if (/\.(ts|mts|tsx)$/.test(n) && !n.endsWith('.d.ts')) files.push(p);
  }
})(src);

const folderOf = (file) => relative(src, file).split(sep)[0];
const IMPORT = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
const violations = [];
const edges = new Map();
/** File -> [imported file, where] for relative imports (type-only imports included: they tie the files as much). */
const fileEdges = new Map();
const core = join(src, 'core');
const internalTo = (target) => {
  const rel = relative(core, target).split(sep).join('/');
  if (rel.startsWith('..')) return null;
  return CORE_INTERNAL.find((m) => (m.endsWith('/') ? rel.startsWith(m) : rel === m || rel === m.replace(/\.ts$/, '.js'))) ?? null;
};
/** The source file a relative import names (`./x.js` is ./x.ts), or null when there is none in src/. */
const fileOf = (target) => {
  for (const c of [target.replace(/\.(m?js)$/, (_, e) => (e === 'mjs' ? '.mts' : '.ts')), target, `${target}.ts`, join(target, 'index.ts')]) if (fileSet.has(c)) return c;
  return null;
};
const fileSet = new Set(files);
/** The text with its comments blanked (line numbers kept): a comment may name a backend, code may not. */
const codeOf = (text) => text.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, (c) => c.replace(/[^\n]/g, ' '));
function storageSeam(file, text) {
  const rel = relative(src, file).split(sep).join('/');
  const code = codeOf(text);
  const lineOf = (index) => code.slice(0, index).split('\n').length;
  const io = STORE_INSTANCEOF.exec(code);
  if (io) violations.push(`${relative(root, file)}:${lineOf(io.index)}: a store is not tested with instanceof (${io[0]}): give the port what the caller needs`);
  const probe = rel.startsWith('store/') ? null : STORE_PROBE.exec(code);
  if (probe) violations.push(`${relative(root, file)}:${lineOf(probe.index)}: a store's kind is not inferred from its methods (${probe[0]}): declare a capability on the port`);
  if (!rel.startsWith('cluster/')) {
    const write = COORDINATION_SQL_OK.write.includes(rel) ? null : COORDINATION_WRITE.exec(code);
    if (write) violations.push(`${relative(root, file)}:${lineOf(write.index)}: writes the cluster's ${write[1]} table outside src/cluster (${write[0]}): coordination SQL lives in src/cluster/`);
    const read = COORDINATION_SQL_OK.read.includes(rel) ? null : LEASE_READ.exec(code);
    if (read) violations.push(`${relative(root, file)}:${lineOf(read.index)}: reads the cluster's leases outside src/cluster (${read[0]}): coordination SQL lives in src/cluster/ (the store checks only the fence it is given)`);
  }
  if (BACKEND_AWARE.some((a) => (a.endsWith('/') ? rel.startsWith(a) : rel === a))) return;
  const name = BACKEND_NAMES.exec(code);
  if (name) violations.push(`${relative(root, file)}:${lineOf(name.index)}: names the storage backend ${name[1]} outside src/store and serve's composition`);
  for (const m of code.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2] ?? m[3];
    if (BACKEND_PACKAGES.includes(spec)) violations.push(`${relative(root, file)}:${lineOf(m.index + m[0].indexOf(spec))}: imports the database driver "${spec}" outside src/store`);
  }
}
for (const file of files) {
  const from = folderOf(file);
  if (from.includes('.')) continue; // src/index.ts: the library entry re-exports
  if (!from.includes('.') && !(from in LAYERS)) violations.push(`${relative(root, file)}: folder src/${from} has no layer (add it to LAYERS)`);
  const text = readFileSync(file, 'utf8');
  storageSeam(file, text);
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2] ?? m[3];
    const line = text.slice(0, m.index).split('\n').length + (m[0].startsWith('\n') ? 1 : 0);
    const where = `${relative(root, file)}:${line}`;
    if (spec.startsWith('.')) {
      const target = resolve(dirname(file), spec);
      const rel = relative(src, target);
      if (rel.startsWith('..')) { violations.push(`${where}: imports ${spec} from outside src/`); continue; }
      const targetFile = fileOf(target);
      if (targetFile !== null) {
        if (!fileEdges.has(file)) fileEdges.set(file, []);
        fileEdges.get(file).push([targetFile, where]);
      }
      const internal = from === 'core' ? null : internalTo(target);
      if (internal !== null) violations.push(`${where}: src/${from} may not import ${spec}: core/${internal} is internal to src/core (import src/core/index.ts)`);
      const to = rel.split(sep)[0];
      if (to === from || to.includes('.')) continue;
      if (!edges.has(from)) edges.set(from, new Map());
      if (!edges.get(from).has(to)) edges.get(from).set(to, where);
      const allowed = LAYERS[from] ?? [];
      if (!allowed.includes('*') && !allowed.includes(to)) violations.push(`${where}: src/${from} may not import src/${to} (${spec})`);
    } else if (from in PURE) {
      const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
      if (!PURE[from].includes(pkg)) violations.push(`${where}: src/${from} is pure and may not import "${spec}"`);
    }
  }
}
// Cycles between folders (depth-first search over the folder graph).
const state = new Map();
const stack = [];
function visit(n) {
  state.set(n, 1);
  stack.push(n);
  for (const [m, where] of edges.get(n) ?? []) {
    if (state.get(m) === 1) violations.push(`cycle: ${[...stack.slice(stack.indexOf(m)), m].join(' -> ')} (closing import at ${where})`);
    else if (!state.has(m)) visit(m);
  }
  stack.pop();
  state.set(n, 2);
}
for (const n of edges.keys()) if (!state.has(n)) visit(n);

// Cycles between files (the same search over the file graph; each cycle reported once, by its closing import).
const fileState = new Map();
const fileStack = [];
function visitFile(f) {
  fileState.set(f, 1);
  fileStack.push(f);
  for (const [g, where] of fileEdges.get(f) ?? []) {
    if (fileState.get(g) === 1) {
      const path = [...fileStack.slice(fileStack.indexOf(g)), g].map((x) => relative(root, x).split(sep).join('/')).join(' -> ');
      violations.push(`file cycle: ${path} (closing import at ${where})`);
    }
    else if (!fileState.has(g)) visitFile(g);
  }
  fileStack.pop();
  fileState.set(f, 2);
}
for (const f of files) if (!fileState.has(f)) visitFile(f);

/** Import rules of a package's src/: `ok(spec)` says whether one import is allowed; `rule` names the rule in the message. */
function checkPackage(name, ok, rule) {
  const dir = join(root, 'packages', name, 'src');
  let names = [];
  try { names = readdirSync(dir).filter((n) => /\.(ts|mts)$/.test(n) && !n.endsWith('.d.ts')); } catch { /* not in this tree */ }
  for (const n of names) {
    const text = readFileSync(join(dir, n), 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3];
      if (!ok(spec)) violations.push(`packages/${name}/src/${n}:${text.slice(0, m.index).split('\n').length}: ${rule} (${spec})`);
    }
  }
}
const ownFile = (spec) => spec.startsWith('./') && !spec.includes('..');
// packages/emitter: its own files, the shared receipt package, OpenTelemetry, node: (never the server package).
checkPackage('emitter', (spec) => spec === '@topology-audit/receipt' || spec.startsWith('@opentelemetry/') || spec.startsWith('node:') || ownFile(spec), 'may import only its own files, "@topology-audit/receipt", @opentelemetry/* and node:');
// packages/receipt: pure, as src/core that imports it: its own files and zod only.
checkPackage('receipt', (spec) => RECEIPT_PACKAGE_PURE.includes(spec) || ownFile(spec), `is pure and may import only its own files and ${RECEIPT_PACKAGE_PURE.join(', ')}`);

if (violations.length) {
  for (const v of violations) console.error(v);
  console.error(`layers: ${violations.length} violation(s) in ${files.length} files`);
  process.exit(1);
}
console.log(`layers: ${files.length} files, ${[...edges.values()].reduce((a, m) => a + m.size, 0)} folder edges, no violations`);
