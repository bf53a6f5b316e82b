/**
 * The renewal of a coordinator: one statement on the heartbeat's own connection (PgHeartbeat.beat) that keeps this
 * instance alive, renews its leases and reads the partitions of instances at their live limit; with each, a sample of
 * the database's clock against this host's. The leases' validity here is kept on the monotonic clock from the instant
 * a renewal was sent (Ownership.validUntil).
 */
import type { ClusterContext } from './context.js';

/** Offset samples kept: the one with the shortest round trip among them is the offset (the least uncertain). */
const OFFSET_SAMPLES = 8;

export class Renewal {
  /**
   * The renewal in flight (one at a time, on the heartbeat's own connection). Renewals do not wait for the steps:
   * while a step runs (a tail read, a takeover, behind a slow pool), the renewal timer renews beside it.
   */
  private renewing: Promise<boolean> | null = null;
  /** Renewals sent so far (Ownership.acquired: the count when each owned partition was taken). */
  renewalsSent = 0;
  /** When (monotonic ms) the last renewal landed: past `beatDeadlineMs` the instance is unready (beatOverdue). */
  private lastRenewedAt = 0;
  readonly renewEveryMs: number;
  private readonly beatDeadlineMs: number;
  /** The last heartbeats' clock samples: database clock minus this host's at the beat's midpoint, and the round trip. */
  private offsetSamples: { offset: number; rtt: number }[] = [];
  offset = { ms: 0, uncertaintyMs: 0, measured: false };
  clockRefused = false;
  liveInstances = 1;
  /** Partitions held by another live instance at its live limit (as of the last renewal). */
  fullParts = new Set<number>();
  /** This instance said it is at its live limit at its last heartbeat. */
  saidFull = false;
  /** The partitions the last renewal found leased here (ascending). */
  lastHeld: number[] = [];

  constructor(private readonly c: ClusterContext) {
    const { opts } = c;
    // Renewing often is cheap (one small statement: PgHeartbeat.beat) and bounds how late an expired lease is claimed.
    this.renewEveryMs = opts.renewEveryMs ?? Math.max(100, Math.min(500, Math.floor(opts.leaseTtlMs / 5)));
    // A renewal that has not landed this long after the last one: a hung statement holds the steps (or the beat hangs).
    this.beatDeadlineMs = opts.beatDeadlineMs ?? Math.max(3 * this.renewEveryMs, Math.floor(opts.leaseTtlMs / 2));
  }

  /** Counts the beat deadline from now (joining). */
  started(): void {
    this.lastRenewedAt = this.c.ownership.mono();
  }

  /** The renewal timer's check: a renewal overdue past the beat deadline makes the store unready (appends refused). */
  checkOverdue(): void {
    if (this.c.ownership.mono() - this.lastRenewedAt > this.beatDeadlineMs) this.c.coordination.beats.beatOverdue();
  }

  /** Whether a renewal is out now. */
  get inFlight(): boolean {
    return this.renewing !== null;
  }

  /**
   * One renewal (heartbeat, lease renewal, clock sample) on the heartbeat's own connection, which never waits for a
   * pool slot behind appends, tail reads or API reads; the one in flight when asked again. Partitions the database no
   * longer gives this instance are dropped, but only those taken before the renewal was sent (one claimed while it was
   * out is not in its answer). False when it came back after the local lease ran out (all dropped).
   */
  renew(): Promise<boolean> {
    this.renewing ??= this.renewOnce().finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  /** A renewal sent after this call (not one already out, whose answer may predate the caller's last claim or release). */
  async renewFresh(): Promise<boolean> {
    await this.renewing?.catch(() => {});
    return this.renew();
  }

  /** Waits for the renewal in flight, if any (leaving the cluster). */
  async settle(): Promise<void> {
    await this.renewing?.catch(() => {});
  }

  private async renewOnce(): Promise<boolean> {
    const { ownership, opts, hooks } = this.c;
    const sent = ownership.mono();
    const n = ++this.renewalsSent;
    // Leases may have expired and been taken: stop acting as owner before renewing anything.
    ownership.guard();
    const full = this.c.engine()?.atLiveLimit() ?? false;
    const wall = hooks.wall ?? Date.now;
    const wallSent = wall();
    // Heartbeat, renewal and the partitions of instances at their live limit: one statement, one round trip.
    const beat = await this.c.coordination.beats.beat(opts.leaseTtlMs, full);
    this.sampleClock(beat.dbNow, wallSent, wall());
    this.saidFull = full;
    this.liveInstances = Math.max(1, beat.liveInstances);
    this.fullParts = new Set(beat.fullParts);
    this.lastHeld = beat.held;
    this.lastRenewedAt = ownership.mono();
    // Renewed on the database clock at some point after `sent`: valid here until sent + ttl, less a renewal's margin.
    ownership.validUntil = sent + opts.leaseTtlMs - this.renewEveryMs;
    if (!ownership.guard()) return false; // the renewal itself took longer than the lease
    const held = new Set(beat.held);
    for (const p of [...ownership.owned]) if (!held.has(p) && (ownership.acquired.get(p) ?? 0) < n) ownership.drop(p);
    return true;
  }

  /**
   * Within a long step (a takeover of many runs, pages of span records): renews the leases when a renewal is due, so
   * the step itself never lets them lapse. Partitions not renewed are dropped. False when none is held any more.
   */
  async keepLeases(): Promise<boolean> {
    const { ownership, opts } = this.c;
    const due = ownership.mono() >= ownership.validUntil - opts.leaseTtlMs + 2 * this.renewEveryMs;
    if (!due && ownership.mono() <= ownership.validUntil) return ownership.owned.size > 0;
    // Also after a local lapse within the step (a slow machine): the database extends only leases that are still this
    // instance's and unexpired, so nobody else can hold one it gets back; nothing was acted on meanwhile. A renewal
    // already out (the timer's, sent during this step) serves.
    await this.renew();
    return ownership.guard() && ownership.owned.size > 0;
  }

  /**
   * One clock sample from a heartbeat: the database's clock_timestamp() against this host's wall clock at the midpoint
   * of the round trip (off by at most half the round trip). The offset is the least uncertain of the last samples.
   */
  private sampleClock(dbNow: number, wallSent: number, wallReceived: number): void {
    if (!Number.isFinite(dbNow)) return;
    this.offsetSamples.push({ offset: dbNow - (wallSent + wallReceived) / 2, rtt: Math.max(0, wallReceived - wallSent) });
    if (this.offsetSamples.length > OFFSET_SAMPLES) this.offsetSamples.shift();
    const best = this.offsetSamples.reduce((a, b) => (b.rtt < a.rtt ? b : a));
    this.offset = { ms: best.offset, uncertaintyMs: best.rtt / 2, measured: true };
    const maxMs = this.c.opts.maxClockOffsetMs ?? 60_000;
    const refuse = Math.abs(best.offset) > maxMs;
    if (refuse !== this.clockRefused) {
      this.clockRefused = refuse;
      this.c.hooks.log(refuse ? 'clock_offset_refused' : 'clock_offset_ok', { offsetMs: Math.round(best.offset), maxMs });
    }
  }
}
