/** Pins in the shared store (the first written by any instance wins, never changed) and contract content by hash. */
import type { Pin } from '../../core/types.js';
import { sharedPin } from '../../core/registry.js';
import type { PinRecord } from '../types.js';
import type { Row } from './rows.js';
import type { PgShared } from './shared.js';

export class PgPins {
  constructor(private readonly s: PgShared) {}

  async getPin(run: string): Promise<PinRecord | null> {
    const res = await this.s.pool.query('SELECT contract, version, phase, contract_hash FROM pins WHERE run = $1', [run]);
    if (res.rows.length === 0) return null;
    const row = res.rows[0] as Row;
    return {
      pin: sharedPin(row.contract as string, row.version as string, row.phase as string),
      contractHash: row.contract_hash as string,
    };
  }

  /** Pins a run; the first pin written (by any instance) wins and is never changed. Returns the pin in force. */
  async setPin(run: string, pin: Pin, contractHash: string): Promise<PinRecord> {
    const res = await this.s.pool.query(
      `INSERT INTO pins (run, contract, version, phase, contract_hash) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (run) DO NOTHING`,
      [run, pin.contract, pin.version, pin.phase, contractHash],
    );
    if (res.rowCount === 1) return { pin: sharedPin(pin.contract, pin.version, pin.phase), contractHash };
    const inForce = await this.getPin(run);
    if (inForce === null) throw new Error(`postgres store: pin of run ${JSON.stringify(run)} vanished`);
    return inForce;
  }

  /**
   * Pins runs in one statement (one transaction, one WAL flush, rather than one per run); per run the first pin
   * written (by any instance) wins and is never changed. Returns the pins in force of the given runs.
   */
  async setPins(rows: readonly { run: string; pin: Pin; contractHash: string }[]): Promise<Map<string, PinRecord>> {
    const inForce = new Map<string, PinRecord>();
    if (rows.length === 0) return inForce;
    const first = new Map<string, { pin: Pin; contractHash: string }>();
    for (const r of rows) if (!first.has(r.run)) first.set(r.run, r);
    // Runs in key order, so two instances' pin writes never wait on each other's inserts in a cycle.
    const runs = [...first.keys()].sort();
    const of = (f: (r: { pin: Pin; contractHash: string }) => string) => runs.map((run) => f(first.get(run)!));
    await this.s.pool.query(
      `INSERT INTO pins (run, contract, version, phase, contract_hash)
       SELECT run, contract, version, phase, contract_hash
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(run, contract, version, phase, contract_hash, ord)
       ORDER BY ord
       ON CONFLICT (run) DO NOTHING`,
      [runs, of((r) => r.pin.contract), of((r) => r.pin.version), of((r) => r.pin.phase), of((r) => r.contractHash)],
    );
    const res = await this.s.pool.query('SELECT run, contract, version, phase, contract_hash FROM pins WHERE run = ANY($1::text[])', [runs]);
    for (const row of res.rows as Row[]) {
      inForce.set(row.run as string, {
        pin: sharedPin(row.contract as string, row.version as string, row.phase as string),
        contractHash: row.contract_hash as string,
      });
    }
    return inForce;
  }

  /** Stores pinned contract content by its hash (first write wins; a hash names one content). */
  async putContractContent(hash: string, contract: string, version: string, content: string): Promise<void> {
    await this.s.pool.query(
      'INSERT INTO contracts (hash, contract, version, content) VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO NOTHING',
      [hash, contract, version, content],
    );
  }

  async getContractContent(hash: string): Promise<string | null> {
    const res = await this.s.pool.query('SELECT content FROM contracts WHERE hash = $1', [hash]);
    return res.rows.length === 0 ? null : (res.rows[0].content as string);
  }
}
