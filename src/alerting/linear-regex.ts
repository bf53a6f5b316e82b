/**
 * Alertmanager's regular expressions (Go RE2 syntax) matched in linear time: the pattern is compiled to a Thompson NFA
 * and the label value is walked once, keeping the set of live states (Pike's simulation, no captures). Time is
 * O(states x characters) whatever the pattern: `(.+)+X`, which JavaScript's backtracking RegExp takes exponential time
 * on, is one pass here. Patterns beyond the supported subset (or past the state bound) are refused with a reason, and
 * the caller skips the silence (Alertmanager still applies it; only the run page does not show it).
 *
 * Supported: literals, `.`, classes (`[a-z]`, `[^…]`, `[[:alpha:]]`, `\d \w \s \D \W \S`, `\pL`, `\p{Greek}`),
 * alternation, groups (`(…)`, `(?:…)`, `(?P<n>…)`, `(?<n>…)`), flags `i`, `s`, `m`, `U` (`(?i)`, `(?i:…)`), repetition
 * (`* + ? {n} {n,} {n,m}` and their lazy forms, counts up to 1000 as RE2), anchors (`^ $ \A \z \b \B`), escapes
 * (`\t \n \r \f \v \a \xFF \x{263a} \123 \Q…\E` and escaped punctuation).
 */

/** States one compiled pattern may have (counted repetitions are copies). */
export const MAX_REGEX_STATES = 5_000;
const MAX_REPEAT = 1000;

type Pred = (c: number) => boolean;
type AssertKind = 'bol' | 'eol' | 'bot' | 'eot' | 'word' | 'nonword';
type Node =
  | { t: 'char'; p: Pred }
  | { t: 'assert'; k: AssertKind }
  | { t: 'cat'; xs: Node[] }
  | { t: 'alt'; xs: Node[] }
  | { t: 'rep'; x: Node; min: number; max: number }; // max -1: unbounded

type Inst = { op: 'char'; p: Pred } | { op: 'split'; x: number; y: number } | { op: 'jmp'; x: number } | { op: 'assert'; k: AssertKind } | { op: 'match' };

/** A pattern the linear matcher does not take; `message` says why (safe to log: no label value). */
export class RegexUnsupported extends Error {}

interface Flags {
  i: boolean;
  s: boolean;
  m: boolean;
}

const range = (lo: number, hi: number): Pred => (c) => c >= lo && c <= hi;
const anyOf = (ps: Pred[]): Pred => (c) => ps.some((p) => p(c));
const not = (p: Pred): Pred => (c) => !p(c);
const DIGIT = range(48, 57);
const WORD: Pred = (c) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const SPACE: Pred = (c) => c === 9 || c === 10 || c === 12 || c === 13 || c === 32;
const POSIX: Record<string, Pred> = {
  alnum: (c) => DIGIT(c) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122),
  alpha: (c) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122),
  ascii: range(0, 127),
  blank: (c) => c === 9 || c === 32,
  cntrl: (c) => c <= 31 || c === 127,
  digit: DIGIT,
  graph: range(33, 126),
  lower: range(97, 122),
  print: range(32, 126),
  punct: (c) => (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126),
  space: (c) => (c >= 9 && c <= 13) || c === 32,
  upper: range(65, 90),
  word: WORD,
  xdigit: (c) => DIGIT(c) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102),
};

/** A Unicode class `\p{Name}` through JavaScript's property escapes, tested one character at a time (no backtracking). */
function unicodeClass(name: string): Pred {
  for (const src of name === 'Any' ? ['[^]'] : [`\\p{${name}}`, `\\p{Script=${name}}`]) {
    try {
      const re = new RegExp(`^${src}$`, 'u');
      return (c) => re.test(String.fromCodePoint(c));
    } catch {
      // not this form
    }
  }
  throw new RegexUnsupported(`unknown Unicode class ${name.slice(0, 40)}`);
}

const fold = (c: number): number[] => {
  const s = String.fromCodePoint(c);
  return [c, s.toLowerCase().codePointAt(0)!, s.toUpperCase().codePointAt(0)!];
};
const caseless = (p: Pred): Pred => (c) => fold(c).some(p);

class Parser {
  private i = 0;
  private readonly cs: number[];

  constructor(src: string) {
    this.cs = Array.from(src, (ch) => ch.codePointAt(0)!);
  }

  parse(): Node {
    const n = this.alt({ i: false, s: false, m: false });
    if (this.i < this.cs.length) throw new RegexUnsupported(`unexpected ) at ${this.i}`);
    return n;
  }

  private peek(k = 0): number | undefined {
    return this.cs[this.i + k];
  }

  private ch(c: number | undefined, s: string): boolean {
    return c !== undefined && c === s.codePointAt(0);
  }

  private alt(outer: Flags): Node {
    const flags = { ...outer }; // `(?i)` changes the flags to the end of the enclosing group, across `|`
    const xs = [this.cat(flags)];
    while (this.ch(this.peek(), '|')) {
      this.i++;
      xs.push(this.cat(flags));
    }
    return xs.length === 1 ? xs[0] : { t: 'alt', xs };
  }

  private cat(flags: Flags): Node {
    const xs: Node[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || this.ch(c, '|') || this.ch(c, ')')) break;
      if (this.ch(c, '(') && this.ch(this.peek(1), '?')) {
        const set = this.flagGroup(flags);
        if (set === null) continue; // `(?flags)`: applies to what follows
        xs.push(this.repeat(set));
        continue;
      }
      xs.push(this.repeat(this.atom(flags)));
    }
    return xs.length === 1 ? xs[0] : { t: 'cat', xs };
  }

  /** `(?flags)` (changes `flags`, returns null) or a `(?…:…)` / named group (returns the group). */
  private flagGroup(flags: Flags): Node | null {
    const start = this.i;
    this.i += 2;
    const c = this.peek();
    if (this.ch(c, 'P') || this.ch(c, '<')) {
      if (this.ch(c, 'P')) this.i++;
      if (!this.ch(this.peek(), '<')) throw new RegexUnsupported(`bad group at ${start}`);
      while (this.peek() !== undefined && !this.ch(this.peek(), '>')) this.i++;
      if (this.peek() === undefined) throw new RegexUnsupported(`unclosed group name at ${start}`);
      this.i++;
      return this.group(flags);
    }
    const local = { ...flags };
    let neg = false;
    for (;;) {
      const f = this.peek();
      if (f === undefined) throw new RegexUnsupported(`unclosed group at ${start}`);
      const k = String.fromCodePoint(f);
      this.i++;
      if (k === '-') neg = true;
      else if (k === 'i' || k === 's' || k === 'm') local[k] = !neg;
      else if (k === 'U') continue; // lazy by default: the same set of matches for a whole-string match
      else if (k === ')') {
        Object.assign(flags, local);
        return null;
      } else if (k === ':') return this.group(local);
      else throw new RegexUnsupported(`unknown flag ${k} at ${this.i - 1}`);
    }
  }

  private group(flags: Flags): Node {
    const n = this.alt(flags);
    if (!this.ch(this.peek(), ')')) throw new RegexUnsupported('missing )');
    this.i++;
    return n;
  }

  private repeat(x: Node): Node {
    for (;;) {
      const c = this.peek();
      let min: number;
      let max: number;
      if (this.ch(c, '*')) [min, max] = [0, -1];
      else if (this.ch(c, '+')) [min, max] = [1, -1];
      else if (this.ch(c, '?')) [min, max] = [0, 1];
      else if (this.ch(c, '{')) {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(String.fromCodePoint(...this.cs.slice(this.i, this.i + 12)));
        if (!m) return x; // a `{` that is no repetition is a literal (RE2)
        min = Number(m[1]);
        max = m[2] === undefined ? min : m[3] === '' ? -1 : Number(m[3]);
        if (min > MAX_REPEAT || max > MAX_REPEAT || (max !== -1 && max < min)) throw new RegexUnsupported(`bad repetition count ${m[0]}`);
        this.i += m[0].length - 1;
      } else return x;
      this.i++;
      if (this.ch(this.peek(), '?')) this.i++; // lazy: the same matches
      x = { t: 'rep', x, min, max };
    }
  }

  private atom(flags: Flags): Node {
    const c = this.peek()!;
    const s = String.fromCodePoint(c);
    this.i++;
    if (s === '(') return this.group(flags);
    if (s === '*' || s === '+' || s === '?') throw new RegexUnsupported(`missing argument to repetition operator at ${this.i - 1}`);
    if (s === '.') return { t: 'char', p: flags.s ? () => true : (x) => x !== 10 };
    if (s === '^') return { t: 'assert', k: flags.m ? 'bol' : 'bot' };
    if (s === '$') return { t: 'assert', k: flags.m ? 'eol' : 'eot' };
    if (s === '[') return this.charNode(this.klass(), flags);
    if (s === '\\') {
      const e = this.peek();
      if (e === undefined) throw new RegexUnsupported('trailing \\');
      const k = String.fromCodePoint(e);
      if (k === 'A') return (this.i++, { t: 'assert', k: 'bot' });
      if (k === 'z') return (this.i++, { t: 'assert', k: 'eot' });
      if (k === 'b') return (this.i++, { t: 'assert', k: 'word' });
      if (k === 'B') return (this.i++, { t: 'assert', k: 'nonword' });
      if (k === 'Q') {
        this.i++;
        const xs: Node[] = [];
        while (this.peek() !== undefined && !(this.ch(this.peek(), '\\') && this.ch(this.peek(1), 'E'))) xs.push(this.charNode(this.lit(this.cs[this.i++]), flags));
        if (this.peek() !== undefined) this.i += 2;
        return { t: 'cat', xs };
      }
      return this.charNode(this.escape(), flags);
    }
    return this.charNode(this.lit(c), flags);
  }

  private lit(c: number): Pred {
    return (x) => x === c;
  }

  private charNode(p: Pred, flags: Flags): Node {
    return { t: 'char', p: flags.i ? caseless(p) : p };
  }

  /** After `\`: a class escape or one character. */
  private escape(): Pred {
    const e = String.fromCodePoint(this.cs[this.i++]);
    const classes: Record<string, Pred> = { d: DIGIT, D: not(DIGIT), w: WORD, W: not(WORD), s: SPACE, S: not(SPACE) };
    if (classes[e]) return classes[e];
    if (e === 'p' || e === 'P') {
      let name: string;
      if (this.ch(this.peek(), '{')) {
        const end = this.cs.indexOf('}'.codePointAt(0)!, this.i);
        if (end < 0) throw new RegexUnsupported('unclosed \\p{');
        name = String.fromCodePoint(...this.cs.slice(this.i + 1, end));
        this.i = end + 1;
      } else {
        if (this.peek() === undefined) throw new RegexUnsupported('trailing \\p');
        name = String.fromCodePoint(this.cs[this.i++]);
      }
      let negate = e === 'P';
      if (name.startsWith('^')) [name, negate] = [name.slice(1), !negate];
      const p = unicodeClass(name);
      return negate ? not(p) : p;
    }
    return this.lit(this.escapedChar(e));
  }

  /** The character an escape names (`\n`, `\x41`, `\.`), after its first letter `e`. */
  private escapedChar(e: string): number {
    const simple: Record<string, number> = { a: 7, f: 12, t: 9, n: 10, r: 13, v: 11 };
    if (simple[e] !== undefined) return simple[e];
    if (e === 'x') {
      const rest = String.fromCodePoint(...this.cs.slice(this.i, this.i + 10));
      const m = /^\{([0-9A-Fa-f]{1,6})\}/.exec(rest) ?? /^([0-9A-Fa-f]{2})/.exec(rest);
      if (!m) throw new RegexUnsupported('bad \\x escape');
      this.i += m[0].length;
      const v = parseInt(m[1], 16);
      if (v > 0x10ffff) throw new RegexUnsupported('bad \\x escape');
      return v;
    }
    if (/^[0-7]$/.test(e)) {
      let digits = e;
      while (digits.length < 3 && this.peek() !== undefined && /^[0-7]$/.test(String.fromCodePoint(this.peek()!))) digits += String.fromCodePoint(this.cs[this.i++]);
      if (e !== '0' && digits.length === 1) throw new RegexUnsupported('backreferences are not RE2');
      return parseInt(digits, 8);
    }
    if (/^[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]$/.test(e)) return e.codePointAt(0)!;
    throw new RegexUnsupported(`unsupported escape \\${e}`);
  }

  /** After `[`: a bracketed class. */
  private klass(): Pred {
    const start = this.i;
    let negate = false;
    if (this.ch(this.peek(), '^')) {
      negate = true;
      this.i++;
    }
    const parts: Pred[] = [];
    let first = true;
    for (;;) {
      const c = this.peek();
      if (c === undefined) throw new RegexUnsupported(`missing ] of the class at ${start}`);
      if (this.ch(c, ']') && !first) {
        this.i++;
        break;
      }
      first = false;
      if (this.ch(c, '[') && this.ch(this.peek(1), ':')) {
        const end = this.cs.indexOf(':'.codePointAt(0)!, this.i + 2);
        const name = end < 0 ? '' : String.fromCodePoint(...this.cs.slice(this.i + 2, end));
        const neg = name.startsWith('^');
        const p = POSIX[neg ? name.slice(1) : name];
        if (p && this.ch(this.cs[end + 1], ']')) {
          parts.push(neg ? not(p) : p);
          this.i = end + 2;
          continue;
        }
      }
      const lo = this.classChar();
      if (typeof lo !== 'number') {
        parts.push(lo);
        continue;
      }
      if (this.ch(this.peek(), '-') && this.peek(1) !== undefined && !this.ch(this.peek(1), ']')) {
        this.i++;
        const hi = this.classChar();
        if (typeof hi !== 'number' || hi < lo) throw new RegexUnsupported(`bad class range at ${start}`);
        parts.push(range(lo, hi));
      } else parts.push(this.lit(lo));
    }
    const p = anyOf(parts);
    return negate ? not(p) : p;
  }

  /** One character of a class, or a class escape (`\d`, `\pL`) as a predicate. */
  private classChar(): number | Pred {
    const c = this.cs[this.i++];
    if (!this.ch(c, '\\')) return c;
    const e = this.peek();
    if (e === undefined) throw new RegexUnsupported('trailing \\');
    if (/^[dDwWsSpP]$/.test(String.fromCodePoint(e))) return this.escape();
    this.i++;
    return this.escapedChar(String.fromCodePoint(e));
  }
}

function compile(root: Node): Inst[] {
  const prog: Inst[] = [];
  const emit = (i: Inst) => {
    if (prog.length >= MAX_REGEX_STATES) throw new RegexUnsupported(`more than ${MAX_REGEX_STATES} states`);
    prog.push(i);
    return prog.length - 1;
  };
  const gen = (n: Node): void => {
    switch (n.t) {
      case 'char':
        emit({ op: 'char', p: n.p });
        return;
      case 'assert':
        emit({ op: 'assert', k: n.k });
        return;
      case 'cat':
        n.xs.forEach(gen);
        return;
      case 'alt': {
        const jumps: number[] = [];
        n.xs.forEach((x, k) => {
          if (k < n.xs.length - 1) {
            const split = emit({ op: 'split', x: 0, y: 0 });
            (prog[split] as { x: number }).x = prog.length;
            gen(x);
            jumps.push(emit({ op: 'jmp', x: 0 }));
            (prog[split] as { y: number }).y = prog.length;
          } else gen(x);
        });
        for (const j of jumps) (prog[j] as { x: number }).x = prog.length;
        return;
      }
      case 'rep': {
        for (let k = 0; k < n.min; k++) gen(n.x);
        if (n.max === -1) {
          const split = emit({ op: 'split', x: 0, y: 0 });
          (prog[split] as { x: number }).x = prog.length;
          gen(n.x);
          emit({ op: 'jmp', x: split });
          (prog[split] as { y: number }).y = prog.length;
          return;
        }
        const splits: number[] = [];
        for (let k = n.min; k < n.max; k++) {
          const split = emit({ op: 'split', x: 0, y: 0 });
          (prog[split] as { x: number }).x = prog.length;
          splits.push(split);
          gen(n.x);
        }
        for (const s of splits) (prog[s] as { y: number }).y = prog.length;
        return;
      }
    }
  };
  gen(root);
  emit({ op: 'match' });
  return prog;
}

const isWord = (c: number | undefined) => c !== undefined && WORD(c);

/** A compiled pattern: `test(value)` is true when the whole value matches (as Alertmanager anchors it). */
export interface LinearRegex {
  readonly states: number;
  test(value: string): boolean;
}

/** Compiles an RE2 pattern, anchored at both ends; throws RegexUnsupported with the reason. */
export function linearRegex(pattern: string): LinearRegex {
  const prog = compile(new Parser(pattern).parse());
  const mark = new Int32Array(prog.length);
  let gen = 0;
  const holds = (k: AssertKind, cs: number[], pos: number): boolean => {
    const prev = cs[pos - 1];
    const next = cs[pos];
    switch (k) {
      case 'bot':
        return pos === 0;
      case 'eot':
        return pos === cs.length;
      case 'bol':
        return pos === 0 || prev === 10;
      case 'eol':
        return pos === cs.length || next === 10;
      case 'word':
        return isWord(prev) !== isWord(next);
      case 'nonword':
        return isWord(prev) === isWord(next);
    }
  };
  /** Adds the thread at `pc` and everything reachable without reading a character. */
  const add = (list: number[], pc0: number, cs: number[], pos: number) => {
    const stack = [pc0];
    while (stack.length) {
      const pc = stack.pop()!;
      if (mark[pc] === gen) continue;
      mark[pc] = gen;
      const ins = prog[pc];
      if (ins.op === 'jmp') stack.push(ins.x);
      else if (ins.op === 'split') stack.push(ins.y, ins.x);
      else if (ins.op === 'assert') {
        if (holds(ins.k, cs, pos)) stack.push(pc + 1);
      } else list.push(pc);
    }
  };
  return {
    states: prog.length,
    test(value: string): boolean {
      const cs = Array.from(value, (ch) => ch.codePointAt(0)!);
      let clist: number[] = [];
      gen++;
      add(clist, 0, cs, 0);
      for (let pos = 0; pos < cs.length && clist.length; pos++) {
        const nlist: number[] = [];
        gen++;
        for (const pc of clist) {
          const ins = prog[pc];
          if (ins.op === 'char' && ins.p(cs[pos])) add(nlist, pc + 1, cs, pos + 1);
        }
        clist = nlist;
      }
      return clist.some((pc) => prog[pc].op === 'match');
    },
  };
}
