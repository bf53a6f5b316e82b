/** Input problems (manifest, case records, receipts): every issue names its file, field and, where known, line. */

export interface InputIssue {
  file: string;
  line?: number;
  col?: number;
  /** Field path, e.g. `candidate.config.model.version`; empty for the whole document or line. */
  field: string;
  message: string;
}

export class ExperimentInputError extends Error {
  constructor(public readonly issues: InputIssue[]) {
    super(issues.map(formatInputIssue).join('\n'));
    this.name = 'ExperimentInputError';
  }
}

export function formatInputIssue(i: InputIssue): string {
  const where = [i.file, i.line, i.line !== undefined ? i.col : undefined].filter((x) => x !== undefined).join(':');
  return `${where}: ${i.field || '(root)'}: ${i.message}`;
}

export type Path = readonly PropertyKey[];

/** `["a", 2, "b"]` -> `a[2].b` */
export function fieldPath(path: Path): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}
