/**
 * The I/O edge: read a manifest, its case-record files (relative to the manifest) and the receipts
 * files they name (relative to the record file). Everything else in src/experiment is pure.
 */
import { readFile } from 'node:fs/promises';
import { dirname, relative, resolve } from 'node:path';
import { ExperimentInputError, type InputIssue } from './errors.js';
import { parseManifest, type ArmName, type Manifest } from './manifest.js';
import { completeCaseRecord, parseCaseRecordLines, type CaseRecord } from './records.js';
import { defaultReceiptParser, deriveRunMeasures, runsOf, type ReceiptParser } from './receipts.js';
import type { Receipt } from '../core/types.js';

export interface LoadOptions {
  /** How receipts files are parsed; defaults to `defaultReceiptParser`. */
  parseReceipts?: ReceiptParser;
  /** How files are read (tests may pass an in-memory reader). */
  readText?: (path: string) => Promise<string>;
}

export interface LoadedExperiment {
  manifest: Manifest;
  baseline: CaseRecord[];
  candidate: CaseRecord[];
}

const readUtf8 = (path: string) => readFile(path, 'utf8');
/** Files are named in errors relative to the working directory, as the user typed the manifest path. */
const shown = (path: string) => relative(process.cwd(), path) || path;

async function readOrFail(read: (p: string) => Promise<string>, path: string, shownAs: string, field = ''): Promise<string> {
  try {
    return await read(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ExperimentInputError([{ file: shownAs, field, message: code === 'ENOENT' ? 'file not found' : `cannot read (${code ?? 'error'})` }]);
  }
}

export async function loadManifest(path: string, opts: LoadOptions = {}): Promise<Manifest> {
  const text = await readOrFail(opts.readText ?? readUtf8, path, path);
  return parseManifest(text, path);
}

/** Load one design's case records, deriving what the named receipts can give. */
export async function loadArmRecords(manifestPath: string, manifest: Manifest, arm: ArmName, opts: LoadOptions = {}): Promise<CaseRecord[]> {
  const read = opts.readText ?? readUtf8;
  const parse = opts.parseReceipts ?? defaultReceiptParser;
  const recordsPath = resolve(dirname(manifestPath), manifest[arm].records);
  const recordsShown = shown(recordsPath);
  const lines = parseCaseRecordLines(await readOrFail(read, recordsPath, recordsShown, `${arm}.records`), recordsShown);
  const finalOwner = manifest[arm].config.topology.finalOwner;
  const receiptFiles = new Map<string, Receipt[]>();
  const out: CaseRecord[] = [];
  const issues: InputIssue[] = [];
  for (const n of lines) {
    let derived;
    if (n.record.receipts) {
      const path = resolve(dirname(recordsPath), n.record.receipts);
      let receipts = receiptFiles.get(path);
      if (!receipts) {
        receipts = parse(await readOrFail(read, path, shown(path)), shown(path));
        receiptFiles.set(path, receipts);
      }
      const runs = runsOf(receipts);
      const run = n.record.run ?? (runs.length === 1 ? runs[0] : undefined);
      if (run === undefined) {
        issues.push({ file: recordsShown, line: n.line, field: 'run', message: `the receipts hold ${runs.length} runs; name one` });
        continue;
      }
      const mine = receipts.filter((r) => r.run === run);
      if (mine.length === 0) {
        issues.push({ file: recordsShown, line: n.line, field: 'run', message: `no receipts for run ${run}` });
        continue;
      }
      derived = deriveRunMeasures(mine, finalOwner);
    }
    const done = completeCaseRecord(n, recordsShown, derived);
    issues.push(...done.issues);
    if (done.record) out.push(done.record);
  }
  if (issues.length > 0) throw new ExperimentInputError(issues);
  return out;
}

export async function loadExperiment(manifestPath: string, opts: LoadOptions = {}): Promise<LoadedExperiment> {
  const manifest = await loadManifest(manifestPath, opts);
  const baseline = await loadArmRecords(manifestPath, manifest, 'baseline', opts);
  const candidate = await loadArmRecords(manifestPath, manifest, 'candidate', opts);
  return { manifest, baseline, candidate };
}
