import { ContractError, compareContractVersions, type Contract, type ContractIssue } from './contract.js';
import type { Pin } from './types.js';

/** A reference to a contract as a run.start names it (version and phase may be left to defaults). */
export interface PinRef {
  contract: string;
  version?: string;
  phase?: string;
}

export type PinResolution = { ok: true; pin: Pin; contract: Contract } | { ok: false; reason: string };

/** A resolved pin per contract and phase: the same frozen answer each time (resolve runs at every evaluation). */
const resolutions = new WeakMap<Contract, Map<string, PinResolution>>();

/** Pins by their fields: one frozen object per (contract, version, phase), shared by every run and verdict. Bounded. */
const pins = new Map<string, Pin>();
const PINS = 10_000;

/**
 * The pin (contract, version, phase) as one shared, frozen object: a live run's stored pin and each of its verdicts
 * hold the same few objects (a pin object per run and verdict cost ~95 bytes a live run). Past the bound a new
 * frozen object is made.
 */
export function sharedPin(contract: string, version: string, phase: string): Pin {
  const key = `${contract}\u0000${version}\u0000${phase}`;
  let pin = pins.get(key);
  if (pin === undefined) {
    pin = Object.freeze({ contract, version, phase });
    if (pins.size < PINS) pins.set(key, pin);
  }
  return pin;
}

/**
 * The contracts known to a process: several versions per contract id, retired versions,
 * and refusal of two different contents under one (contract, version).
 */
export class ContractRegistry {
  private readonly byId = new Map<string, Contract[]>();
  private revisionCount = 0;

  /** Bumped by every contract added (a cached verdict depends on the registry's content). */
  get revision(): number {
    return this.revisionCount;
  }

  static fromContracts(contracts: Contract[]): ContractRegistry {
    const r = new ContractRegistry();
    const issues: ContractIssue[] = [];
    for (const c of contracts) {
      const problem = r.add(c);
      if (problem) issues.push(problem);
    }
    if (issues.length) throw new ContractError(issues);
    return r;
  }

  /** Adds a contract; returns an issue when another content already holds its (contract, version). */
  add(c: Contract): ContractIssue | null {
    const list = this.byId.get(c.contract) ?? [];
    const same = list.find((x) => x.version === c.version);
    if (same) {
      if (same.hash === c.hash) return null;
      return {
        file: c.file ?? '<contract>',
        line: 1,
        col: 1,
        field: 'version',
        message: `contract "${c.contract}" version "${c.version}" already exists with different content (in ${same.file ?? 'the store'}); publish a new version instead`,
      };
    }
    list.push(c);
    list.sort((a, b) => compareContractVersions(a.version, b.version));
    this.revisionCount++;
    this.byId.set(c.contract, list);
    return null;
  }

  get(contract: string, version: string): Contract | undefined {
    return this.byId.get(contract)?.find((c) => c.version === version);
  }

  /** The newest non-retired version, never a retired one nor a candidate. */
  newest(contract: string): Contract | undefined {
    const list = this.byId.get(contract);
    if (!list) return undefined;
    for (let i = list.length - 1; i >= 0; i--) if (!list[i].retired && !list[i].candidate) return list[i];
    return undefined;
  }

  versions(contract: string): Contract[] {
    return this.byId.get(contract)?.slice() ?? [];
  }

  all(): Contract[] {
    return [...this.byId.values()].flat();
  }

  ids(): string[] {
    return [...this.byId.keys()].sort();
  }

  /** Resolve a pin reference: version defaults to the newest non-retired, phase to the first. */
  resolve(ref: PinRef): PinResolution {
    const list = this.byId.get(ref.contract);
    if (!list) return { ok: false, reason: `contract "${ref.contract}" does not exist` };
    let contract: Contract | undefined;
    if (ref.version !== undefined) {
      contract = list.find((c) => c.version === ref.version);
      if (!contract) return { ok: false, reason: `contract "${ref.contract}" has no version "${ref.version}"` };
      if (contract.candidate) return { ok: false, reason: `contract "${ref.contract}" version "${ref.version}" is a candidate (candidate: true): never pinned, only shadow-evaluated; remove the mark and publish it to adopt it` };
    } else {
      contract = this.newest(ref.contract);
      if (!contract) return { ok: false, reason: `contract "${ref.contract}" has no non-retired, non-candidate version` };
    }
    const phase = ref.phase ?? contract.phases[0].name;
    if (!contract.phases.some((p) => p.name === phase)) {
      return { ok: false, reason: `contract "${ref.contract}" version "${contract.version}" has no phase "${phase}"` };
    }
    let byPhase = resolutions.get(contract);
    if (byPhase === undefined) resolutions.set(contract, (byPhase = new Map()));
    let resolution = byPhase.get(phase);
    if (resolution === undefined) byPhase.set(phase, (resolution = Object.freeze({ ok: true, pin: sharedPin(contract.contract, contract.version, phase), contract })));
    return resolution;
  }
}
