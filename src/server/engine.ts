/**
 * The live auditor: receipts -> store -> run view -> verdict. Keeps one RunState per live run in memory
 * (rebuilt from the store on start), re-evaluates only the runs a batch touched, and moves verdicts with time
 * through a deadline heap. The verdict itself is the pure `evaluate` of src/core.
 */
import { EventEmitter } from 'node:events';
import { contractFromCanonical, type Contract } from '../core/contract.js';
import { RunState, evaluate, resolvePin, type Pinning } from '../core/classify.js';
import type { ContractRegistry } from '../core/registry.js';
import type { Finding, Receipt, RunVerdict, Verdict } from '../core/types.js';
import type { PinRecord, ReceiptStore, SpanLogEntry } from '../store/index.js';
import { DeadlineHeap } from './heap.js';
import { DeliveredDigests } from './delivered.js';

export interface EngineHooks {
  /** A run entered a verdict (also on first evaluation). */
  verdictEntered?: (run: string, contract: string, version: string, verdict: Verdict, previous: { contract: string; version: string; verdict: Verdict } | null) => void;
  receipts?: (type: string, result: 'accepted' | 'duplicate' | 'conflict', n: number) => void;
}

export interface EngineOptions {
  defaultContract?: string;
  /** Settled runs idle for longer than this are pruned from store and memory. */
  retentionMs: number;
  /** Extra findings (e.g. the handoff lifecycle audit). */
  extraFindings?: (state: RunState, now: number) => Finding[];
  hooks?: EngineHooks;
  /** Bound of the redelivery digests kept for live runs (see DeliveredDigests). */
  maxDeliveredDigests?: number;
}

interface LiveRun {
  state: RunState;
  verdict: RunVerdict;
  updatedAt: number;
  /** The run's pin record once one exists (a pin never changes once written), so evaluations skip the store. */
  pin?: PinRecord;
  /** The gauge key of `gaugeOf` (the verdict it was made from), so the per-tick gauge allocates nothing per run. */
  gaugeOf?: RunVerdict;
  gaugeId?: string;
  gaugeKey?: GaugeKey;
}

type GaugeKey = { contract: string; version: string; verdict: Verdict };

export interface IngestOutcome {
  accepted: number;
  duplicates: number;
  conflicts: number;
}

const key = (v: RunVerdict) => (v.pin ? { contract: v.pin.contract, version: v.pin.version, verdict: v.verdict } : { contract: '', version: '', verdict: v.verdict });

export class AuditEngine extends EventEmitter {
  private readonly runs = new Map<string, LiveRun>();
  private readonly deadlines = new DeadlineHeap();
  private readonly pinnedContracts = new Map<string, Contract>(); // by content hash
  /** Digests of stored receipts of live runs: a redelivery is recognised without the store (see DeliveredDigests). */
  private readonly delivered: DeliveredDigests;

  constructor(
    readonly registry: ContractRegistry,
    readonly store: ReceiptStore,
    private readonly opts: EngineOptions,
  ) {
    super();
    this.setMaxListeners(0);
    this.delivered = new DeliveredDigests(opts.maxDeliveredDigests);
    for (const c of registry.all()) this.pinnedContracts.set(c.hash, c);
  }

  /** Rebuild live state from the store; refuses a contract file changed under a version a run is pinned to. */
  restore(now: number): { runs: number; receipts: number } {
    let receipts = 0;
    const changed: string[] = [];
    for (const lr of this.store.liveRuns()) {
      if (lr.pin && lr.contractHash) {
        const current = this.registry.get(lr.pin.contract, lr.pin.version);
        if (current && current.hash !== lr.contractHash) changed.push(`${lr.pin.contract}@${lr.pin.version} (pinned by run ${lr.run})`);
        if (!this.pinnedContracts.has(lr.contractHash)) {
          const content = this.store.getContractContent(lr.contractHash);
          if (content) this.pinnedContracts.set(lr.contractHash, contractFromCanonical(content, `pinned ${lr.pin.contract}@${lr.pin.version}`));
        }
      }
      const state = new RunState(lr.run);
      for (const r of this.store.runReceipts(lr.run)) {
        state.add(r);
        receipts++;
      }
      if (state.size === 0 && state.conflicts.size === 0) continue;
      const verdict = this.evaluateRun(state, now);
      this.runs.set(lr.run, { state, verdict, updatedAt: lr.updatedAt });
      this.deadlines.set(lr.run, verdict.nextChangeAt);
    }
    if (changed.length) {
      throw new Error(`contract file changed under an existing version: ${[...new Set(changed)].join(', ')}; publish a new version instead (running runs keep their pinned content)`);
    }
    return { runs: this.runs.size, receipts };
  }

  private pinningFor(state: RunState, live?: LiveRun): Pinning {
    const record = live?.pin ?? this.store.getPin(state.run);
    if (live && record) live.pin = record;
    const start = state.firstStart();
    // A stored pin is never changed: it holds while no run.start names another pin (a run.start that does governs,
    // e.g. over a default pin taken before it arrived). Its content comes from the store even if the file is gone.
    if (record && (!start || (start.contract === record.pin.contract && (start.version ?? record.pin.version) === record.pin.version && (start.phase ?? record.pin.phase) === record.pin.phase))) {
      const c = this.pinnedContracts.get(record.contractHash);
      if (c) return { ok: true, pin: record.pin, contract: c };
    }
    const p = resolvePin(state, this.registry, this.opts.defaultContract);
    if (p.ok) {
      if (record && record.pin.contract === p.pin.contract && record.pin.version === p.pin.version) {
        const c = this.pinnedContracts.get(record.contractHash);
        if (c) return { ok: true, pin: p.pin, contract: c };
      }
      if (!record) {
        this.store.putContractContent(p.contract.hash, p.contract.contract, p.contract.version, p.contract.canonical);
        const pinned = this.store.setPin(state.run, p.pin, p.contract.hash);
        if (live) live.pin = pinned;
      }
    }
    return p;
  }

  private evaluateRun(state: RunState, now: number, live?: LiveRun): RunVerdict {
    return evaluate(state, this.pinningFor(state, live), now, { registry: this.registry, extraFindings: this.opts.extraFindings });
  }

  /**
   * Durably store receipts, then update the touched runs. Resolves only after the commit (an acknowledged receipt
   * is never lost); rejects when the store cannot commit (nothing is acknowledged then).
   */
  async ingest(receipts: Receipt[], source: string, now: number, spanLog?: SpanLogEntry[]): Promise<IngestOutcome> {
    if (receipts.length === 0 && !spanLog?.length) return { accepted: 0, duplicates: 0, conflicts: 0 };
    const perType = new Map<string, { accepted: number; duplicate: number; conflict: number }>();
    // A redelivery of stored content of a live run is a duplicate without a store round trip (see DeliveredDigests).
    const incoming = receipts;
    const digests: string[] = [];
    let known = 0;
    receipts = [];
    for (const r of incoming) {
      const d = DeliveredDigests.digest(r);
      if (this.runs.has(r.run) && this.delivered.has(r.run, r.event, d)) {
        known++;
        const t = perType.get(r.type) ?? { accepted: 0, duplicate: 0, conflict: 0 };
        t.duplicate++;
        perType.set(r.type, t);
      } else {
        receipts.push(r);
        digests.push(d);
      }
    }
    const res = await this.store.append(receipts.map((receipt) => ({ receipt, source, receivedAt: now })), spanLog);
    res.duplicates += known;
    const touched = new Set<string>();
    receipts.forEach((r, i) => {
      let live = this.runs.get(r.run);
      if (!live) {
        const state = new RunState(r.run);
        live = { state, verdict: null as unknown as RunVerdict, updatedAt: now };
        this.runs.set(r.run, live);
      }
      const result = live.state.add(r);
      const outcome = res.results[i] === 'conflict' || result === 'conflict' ? 'conflict' : result;
      if (outcome !== 'duplicate') touched.add(r.run);
      if (outcome !== 'conflict') this.delivered.record(r.run, r.event, digests[i]);
      const t = perType.get(r.type) ?? { accepted: 0, duplicate: 0, conflict: 0 };
      t[outcome]++;
      perType.set(r.type, t);
    });
    for (const [type, t] of perType) {
      for (const k of ['accepted', 'duplicate', 'conflict'] as const) if (t[k]) this.opts.hooks?.receipts?.(type, k, t[k]);
    }
    for (const run of touched) this.reevaluate(run, now);
    return { accepted: res.accepted, duplicates: res.duplicates, conflicts: res.conflicts };
  }

  private reevaluate(run: string, now: number): void {
    const live = this.runs.get(run);
    if (!live) return;
    const before = live.verdict;
    const after = this.evaluateRun(live.state, now, live);
    live.verdict = after;
    live.updatedAt = now;
    this.deadlines.set(run, after.nextChangeAt);
    const a = key(after);
    const b = before ? key(before) : null;
    if (!b || a.verdict !== b.verdict || a.contract !== b.contract || a.version !== b.version) {
      this.opts.hooks?.verdictEntered?.(run, a.contract, a.version, a.verdict, b);
    }
    if (!before || before.verdict !== after.verdict || before.settled !== after.settled || before.findings.length !== after.findings.length) {
      this.store.setVerdictState(run, after.verdict, after.settled, now);
    }
    this.emit('run', run, after);
  }

  /** Move verdicts with time: re-evaluate the runs whose next deadline passed. */
  tick(now: number): number {
    const due = this.deadlines.popDue(now);
    for (const run of due) this.reevaluate(run, now);
    return due.length;
  }

  /** Prune settled runs idle for longer than the retention; memory is bounded by live runs. */
  prune(now: number): number {
    let n = 0;
    for (const [run, live] of this.runs) {
      if (live.verdict.settled && now - live.updatedAt > this.opts.retentionMs) {
        this.runs.delete(run);
        this.delivered.forget(run);
        this.deadlines.set(run, null);
        n++;
      }
    }
    this.store.prune(this.opts.retentionMs, now);
    return n;
  }

  get(run: string): { verdict: RunVerdict; receipts: Receipt[]; updatedAt: number } | null {
    const live = this.runs.get(run);
    if (!live) return null;
    return { verdict: live.verdict, receipts: [...live.state.byEvent.values(), ...[...live.state.conflicts.values()].flat()], updatedAt: live.updatedAt };
  }

  verdictOf(run: string): RunVerdict | null {
    return this.runs.get(run)?.verdict ?? null;
  }

  list(filter: { verdict?: string; contract?: string; limit?: number }): { verdict: RunVerdict; updatedAt: number; firstAt: number }[] {
    const out: { verdict: RunVerdict; updatedAt: number; firstAt: number }[] = [];
    for (const live of this.runs.values()) {
      const v = live.verdict;
      if (filter.verdict && v.verdict !== filter.verdict) continue;
      if (filter.contract && v.pin?.contract !== filter.contract) continue;
      out.push({ verdict: v, updatedAt: live.updatedAt, firstAt: live.state.firstAt });
    }
    out.sort((a, b) => b.firstAt - a.firstAt || (a.verdict.run < b.verdict.run ? -1 : 1));
    return out.slice(0, filter.limit ?? 100);
  }

  /** Runs per (contract, version, verdict), for the topology_runs gauge. */
  gauge(): { contract: string; version: string; verdict: Verdict; count: number }[] {
    const m = new Map<string, { contract: string; version: string; verdict: Verdict; count: number }>();
    for (const live of this.runs.values()) {
      if (live.gaugeOf !== live.verdict) {
        const k = key(live.verdict);
        live.gaugeOf = live.verdict;
        live.gaugeKey = k;
        live.gaugeId = `${k.contract}\u0000${k.version}\u0000${k.verdict}`;
      }
      const e = m.get(live.gaugeId!);
      if (e) e.count++;
      else m.set(live.gaugeId!, { ...live.gaugeKey!, count: 1 });
    }
    return [...m.values()];
  }

  get liveRuns(): number {
    return this.runs.size;
  }

  get scheduledDeadlines(): number {
    return this.deadlines.size;
  }
}
