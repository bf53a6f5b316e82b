/**
 * The pin step of append -> fold -> pin -> evaluate, and the pins of runs other instances hold: which contract a run
 * is judged by. A stored pin holds while no run.start names another one (pinGoverns, src/core/pin.ts); the first
 * pin is persisted with its contract's content, so a run keeps its pinned content even if the file changes. A run's
 * first pin is resolved before the append that brings the run (firstPin) and written in the append's transaction:
 * no stored run is ever without its pin, even after a kill -9 right after the COMMIT. The pin step persists only what
 * no append pinned (a restored run without a pin, a run that became pinnable otherwise).
 */
import { contractFromCanonical, type Contract } from '../core/contract.js';
import { RunState, evaluate, resolvePin, type Pinning } from '../core/classify.js';
import { pinGoverns } from '../core/pin.js';
import type { ContractRegistry } from '../core/registry.js';
import type { Receipt, RunVerdict } from '../core/types.js';
import type { AppendPin, PinRecord } from '../store/index.js';
import type { DetachedRun, PinStore } from './store.js';

/** Pins of runs other instances hold, kept for the run-scope rule (oldest dropped first beyond this). */
const MAX_FOREIGN_PINS = 10_000;

export class Pinner {
  /** Pinned contracts by content hash (the registry's, and those read back from the store). */
  private readonly contracts = new Map<string, Contract>();
  /** Cluster mode: pins of runs other instances hold, read for the run-scope rule (bounded, oldest dropped first). */
  private readonly foreign = new Map<string, PinRecord>();

  constructor(
    private readonly registry: ContractRegistry,
    private readonly store: PinStore,
    private readonly defaultContract: string | undefined,
  ) {
    for (const c of registry.all()) this.contracts.set(c.hash, c);
  }

  /** The pinned contract of a content hash, if known here. */
  contract(hash: string): Contract | undefined {
    return this.contracts.get(hash);
  }

  /** Learns a pinned contract's canonical content (a restore, a takeover, a shared-store read); throws if unreadable. */
  learn(hash: string, content: string, label: string): void {
    if (!this.contracts.has(hash)) this.contracts.set(hash, contractFromCanonical(content, label));
  }

  /** A contract the registry resolved (a run.start read from the shared store names it). */
  learnResolved(c: Contract): void {
    this.contracts.set(c.hash, c);
  }

  /**
   * The run's pinning, and its first pin persisted (the contract content, then the pin row). `held`: the pin record
   * the live run holds in memory; `keep` receives the record once one exists.
   */
  pin(state: RunState, held: PinRecord | undefined, keep?: (record: PinRecord) => void): Pinning {
    const record = held ?? this.store.getPin(state.run);
    if (record && !held) keep?.(record);
    const { pinning, persist } = this.resolve(state, record);
    if (persist && pinning.ok) {
      this.store.putContractContent(pinning.contract.hash, pinning.contract.contract, pinning.contract.version, pinning.contract.canonical);
      keep?.(this.store.setPin(state.run, pinning.pin, pinning.contract.hash));
    }
    return pinning;
  }

  /** The run's pinning from its stored pin and its receipts; `persist`: no pin is stored yet. */
  private resolve(state: RunState, record: PinRecord | null): { pinning: Pinning; persist: boolean } {
    // A stored pin is never changed: it holds while no run.start names another pin (a run.start that does governs,
    // e.g. over a default pin taken before it arrived). Its content comes from the store even if the file is gone.
    if (record && pinGoverns(state.firstStart(), record.pin)) {
      const c = this.contracts.get(record.contractHash);
      if (c) return { pinning: { ok: true, pin: record.pin, contract: c }, persist: false };
    }
    const p = resolvePin(state, this.registry, this.defaultContract);
    if (p.ok && record && record.pin.contract === p.pin.contract && record.pin.version === p.pin.version) {
      const c = this.contracts.get(record.contractHash);
      if (c) return { pinning: { ok: true, pin: p.pin, contract: c }, persist: false };
    }
    return { pinning: p, persist: !record };
  }

  /** The pure verdict of a run read from the shared store (its stored pin, else the pin its receipts resolve to). */
  evaluateDetached(d: DetachedRun, now: number): RunVerdict {
    return this.judgeDetached(d, now).verdict;
  }

  /** evaluateDetached, with the run's conflicted event ids (what its receipts' view orders last, see viewReceipts). */
  judgeDetached(d: DetachedRun, now: number): { verdict: RunVerdict; conflicts: ReadonlyMap<string, unknown> } {
    const state = new RunState(d.run);
    for (const r of d.receipts) state.add(r);
    let pinning: Pinning | null = null;
    if (d.pin) {
      let c = this.contracts.get(d.pin.contractHash);
      if (!c && d.contractContent) c = contractFromCanonical(d.contractContent, `pinned ${d.pin.pin.contract}@${d.pin.pin.version}`);
      if (c && pinGoverns(state.firstStart(), d.pin.pin)) pinning = { ok: true, pin: d.pin.pin, contract: c };
    }
    pinning ??= resolvePin(state, this.registry, this.defaultContract);
    return { verdict: evaluate(state, pinning, now, { registry: this.registry }), conflicts: state.conflicts };
  }

  /**
   * The contract the run-scope rule checks a run-level receipt against (src/ingest/trust.ts): the run's pinned
   * contract; before any pin, the one its earliest run.start (held: `first`; or among `batch`) names, else the default.
   */
  scopeContract(run: string, held: PinRecord | undefined, first: Receipt | null, batch: readonly Receipt[]): Contract | null {
    const record = held ?? this.store.getPin(run) ?? this.foreign.get(run);
    if (record) return this.contracts.get(record.contractHash) ?? null;
    const p = this.unpinned(run, first, batch.filter((r) => r.run === run && r.type === 'run.start'));
    return p.ok ? p.contract : null;
  }

  /**
   * The first pin of a run that has no pin record, resolved before the append that brings `starts` (the batch's
   * run.starts of the run; `first`: the earliest run.start the live run holds) as the pin step after the fold
   * resolves it: the append writes it, with its contract's content, in its transaction. Null: no contract resolves.
   */
  firstPin(run: string, first: Receipt | null, starts: readonly Receipt[]): AppendPin | null {
    const p = this.unpinned(run, first, starts);
    if (!p.ok) return null;
    const c = p.contract;
    return { run, pin: p.pin, contractHash: c.hash, contract: c.contract, version: c.version, content: c.canonical };
  }

  /** Before a run's first pin: the pin its earliest run.start (`first`, or among `starts`) names, else the default's. */
  private unpinned(run: string, first: Receipt | null, starts: readonly Receipt[]): Pinning {
    const state = new RunState(run);
    if (first) state.add(first);
    for (const r of starts) state.add(r);
    return resolvePin(state, this.registry, this.defaultContract);
  }

  /** Whether a foreign run's pin is known here already. */
  hasForeign(run: string): boolean {
    return this.foreign.has(run);
  }

  /**
   * Records the pin of a run another instance holds: its stored pin (with its contract's content), else the pin its
   * stored run.start names (not pinned yet: its owner writes the pin just after the first evaluation).
   */
  rememberForeign(run: string, record: PinRecord | null, contractContent: string | null, receipts: () => readonly Receipt[]): void {
    if (!record) {
      const state = new RunState(run);
      for (const r of receipts()) if (r.type === 'run.start') state.add(r);
      const resolved = resolvePin(state, this.registry, this.defaultContract);
      if (!resolved.ok || !state.firstStart()) return;
      this.contracts.set(resolved.contract.hash, resolved.contract);
      record = { pin: resolved.pin, contractHash: resolved.contract.hash };
    } else if (!this.contracts.has(record.contractHash) && contractContent) {
      this.contracts.set(record.contractHash, contractFromCanonical(contractContent, `pinned ${record.pin.contract}@${record.pin.version}`));
    }
    if (this.foreign.size >= MAX_FOREIGN_PINS) this.foreign.delete(this.foreign.keys().next().value!);
    this.foreign.set(run, record);
  }
}
