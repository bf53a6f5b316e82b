/**
 * The ingest use case shared by every transport (the Consumer of ./consumer.ts): decoded spans -> receipts -> trust
 * rules -> durable store -> live verdicts, with admission control (bounded in-flight work instead of unbounded
 * queues). Every refusal is a ConsumeError.
 */
import type { Receipt } from '../core/types.js';
import type { LoggedSpan, PendingTraceLog, SpanPipeline } from '../ingest/pipeline.js';
import { decodeLoggedSpans, encodeLoggedSpans } from '../ingest/span-log.js';
import type { DecodedExport, SpanRecord } from '../otlp/types.js';
import { derivedBinding, evidenceOf, handoffParty, handoffPartiesOf, noteHandoffParties, runScope, UNBOUND, type HandoffParties, type RejectReason, type SourceAgents } from '../ingest/trust.js';
import type { Slicer, SpanLogEntry } from '../store/index.js';
import { LiveLimitError, type AuditEngine, type IngestOutcome } from './engine.js';
import type { Ownership } from './ownership.js';
import { ConsumeError, type Consumer, type IngestSource, type ReceiptIngestResult, type Refusal, type SourceBinding, type SpanIngestResult } from './consumer.js';

export type { Refusal, SourceBinding, SpanIngestResult } from './consumer.js';

/** Spans of whole traces the pipeline reads between two looks at the clock (a wide export is read in such slices). */
export const SLICE_SPANS = 4096;
const yieldNow = () => new Promise<void>((r) => setImmediate(r));

function toSpanLog(log: PendingTraceLog[], now: number, forwarded = false): SpanLogEntry[] {
  return log.map((l) => spanLogEntry(l, now, forwarded));
}

const spanLogEntry = (l: PendingTraceLog, now: number, forwarded: boolean): SpanLogEntry => ({ traceId: l.traceId, loggedAt: now, body: encodeLoggedSpans(l.spans), ...(forwarded ? { forwarded } : {}) });

/** toSpanLog of a wide export's log, encoded in slices that yield to the event loop (~8 ms each). */
async function toSpanLogInSlices(log: PendingTraceLog[], now: number, out: SpanLogEntry[]): Promise<void> {
  let started = performance.now();
  for (let i = 0; i < log.length; i++) {
    out.push(spanLogEntry(log[i], now, false));
    if ((i & 255) === 255 && performance.now() - started > 8) {
      await yieldNow();
      started = performance.now();
    }
  }
}

/** Span log entries replayed per commit after a restart (see Ingestor.replaySpanLog). */
export const REPLAY_BATCH = 500;

export interface IngestLimits {
  /** Receipts accepted but not yet committed, across requests, beyond which requests are refused as saturated. */
  maxPendingReceipts: number;
  /** Concurrent ingest requests beyond which requests are refused as saturated. */
  maxInflightRequests: number;
}

/**
 * The counters the use case moves (the metrics layer's AuditMetrics has them; the audit layer does not import it,
 * as the engine's events do not: src/metrics/events.ts subscribes to them).
 */
export interface ConsumerCounters {
  receipt(type: string, result: 'rejected', n?: number): void;
  ingestRefused(reason: RejectReason, n?: number): void;
  otlpSpans(transport: 'http' | 'grpc', result: 'receipt' | 'dropped' | 'rejected', n?: number): void;
}

export class Ingestor implements Consumer {
  private inflight = 0;
  private pendingReceipts = 0;
  private replaying: { done: number; total: number } | null = null;

  constructor(
    readonly engine: AuditEngine,
    readonly pipeline: SpanPipeline,
    readonly metrics: ConsumerCounters,
    readonly limits: IngestLimits,
    private readonly clock: () => number = Date.now,
    /** The agents each ingest source is bound to (`--ingest-tokens`); unbound when absent. */
    private readonly sources: SourceAgents = UNBOUND,
    /**
     * Which traces another instance resolves (their spans are forwarded through the shared span log) and which runs
     * are held elsewhere (ownership.ts); default: the engine's. Its lost traces drop the pipeline's pending spans.
     */
    private readonly ownership: Ownership = engine.ownership,
  ) {
    ownership.onTracesLost((pick) => pipeline.dropTraces(pick));
  }

  /**
   * The trust rules every receipt passes before it is stored (docs/security.md): a derived receipt's ends are
   * vouched for by the sources of the spans naming them (whichever request or restart completed it), an
   * explicit one's `from` by the sending token (`bind`); run-level receipts and gaps from a bound source are
   * in the scope of the run's pinned contract. Returns the kept receipts and the refusals (counted by reason).
   */
  trust(receipts: Receipt[], source: string, bind?: SourceBinding): { kept: Receipt[]; refused: Refusal[] } {
    const kept: Receipt[] = [];
    const refused: Refusal[] = [];
    // The parties of each run's handoffs as the stored receipts and this batch's kept ones name them (read on demand).
    const parties = new Map<string, Map<string, HandoffParties>>();
    const partiesOf = (run: string) => {
      let p = parties.get(run);
      if (!p) parties.set(run, (p = handoffPartiesOf(this.engine.storedHandoffReceipts(run))));
      return p;
    };
    receipts.forEach((r, index) => {
      const ev = evidenceOf(r);
      let code: RejectReason = 'source_not_bound';
      let why = ev ? derivedBinding(r, ev, this.sources) : (bind?.(r) ?? null);
      if (!why) {
        const from = ev ? ev.span : source;
        if (from !== undefined) {
          const agents = this.sources(from);
          if (agents !== null) {
            const contract = () => this.engine.scopeContract(r.run, receipts);
            why = runScope(r, agents, from, contract);
            code = 'run_scope';
            if (!why && !ev && r.type === 'handoff') {
              why = handoffParty(r, agents, from, contract, (h) => partiesOf(r.run).get(h));
              code = 'handoff_party';
            }
          }
        }
      }
      if (why) {
        refused.push({ index, reason: why });
        this.metrics.receipt(r.type, 'rejected');
        this.metrics.ingestRefused(code);
      } else {
        kept.push(r);
        if (r.type === 'handoff' && !ev && this.sources(source) !== null) noteHandoffParties(partiesOf(r.run), r);
      }
    });
    return { kept, refused };
  }

  /**
   * Cluster mode: the trust rules judge runs another instance holds as the single instance does: the run-scope rule
   * (run-level receipts and gaps from a bound source) and the root budget by the run's stored pin, the handoff party
   * rule (explicit handoff receipts) by the parties its stored handoffs named; both are read from the shared store first. Nothing
   * to do otherwise.
   */
  async prepareTrust(receipts: readonly Receipt[]): Promise<void> {
    if (this.sources === UNBOUND || !this.ownership.remote) return;
    const pinRuns: string[] = [];
    const partyRuns: string[] = [];
    for (const r of receipts) {
      if (r.type === 'run.start' || r.type === 'run.end' || r.type === 'outcome' || r.type === 'gap') pinRuns.push(r.run);
      else if (r.type === 'handoff' && !evidenceOf(r)) {
        partyRuns.push(r.run);
        if (r.budgetOp === 'root') pinRuns.push(r.run); // the root budget is the pinned contract owner's
      }
    }
    if (pinRuns.length === 0 && partyRuns.length === 0) return;
    try {
      await this.engine.prefetchTrust(pinRuns, partyRuns);
    } catch (e) {
      // The shared store cannot be read: nothing is stored or acknowledged (503, retry), as when a commit fails.
      throw new ConsumeError('store_unavailable', `the pins and handoff parties of runs held elsewhere could not be read: ${(e as Error).message}`);
    }
  }

  get saturated(): boolean {
    return this.inflight >= this.limits.maxInflightRequests || this.pendingReceipts >= this.limits.maxPendingReceipts;
  }

  get queueDepth(): number {
    return this.pendingReceipts;
  }

  /**
   * Admission: refuse at once when saturated. Otherwise the request counts as in flight until the returned
   * release is called (once, when it is answered). A store that cannot commit is not a reason to refuse here:
   * the commit itself fails (nothing is acknowledged: 503) and the first commit that lands again recovers.
   */
  admit(): () => void {
    if (this.saturated) throw ConsumeError.saturated();
    this.inflight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inflight--;
    };
  }

  private async commit(receipts: Receipt[], source: string, spanLog?: SpanLogEntry[], limits = true): Promise<IngestOutcome> {
    this.pendingReceipts += receipts.length;
    try {
      return await this.engine.ingest(receipts, source, this.clock(), spanLog, limits);
    } catch (e) {
      if (e instanceof LiveLimitError) throw new ConsumeError('live_limit', e.message, { limit: e.limit, retryAfterSeconds: e.retryAfterSeconds });
      throw new ConsumeError('store_unavailable', `receipts could not be committed: ${(e as Error).message}`);
    } finally {
      this.pendingReceipts -= receipts.length;
    }
  }

  /**
   * OTLP spans from either transport. Resolves after every receipt is durably committed.
   * The decoded spans are used only before the commit starts (nothing refers to them while it waits), so a
   * batch's hundreds of span records die young instead of being carried through the collector's survivor
   * spaces into the old generation while the commit's fsync runs.
   */
  async consumeSpans(decoded: DecodedExport, transport: 'http' | 'grpc', from: IngestSource): Promise<SpanIngestResult> {
    const { source, bind } = from;
    {
      const now = this.clock();
      let local = decoded.spans;
      const spanCount = decoded.spanCount; // the frame below must not hold the decoded spans while the commit waits
      decoded = { spans: [], spanCount };
      let foreign: typeof local = [];
      if (this.ownership.forwarding) {
        // Cluster, spans not routed by trace id: traces another instance resolves are forwarded through the shared
        // span log (LangGraph's too: the resolver reads the graph).
        const all = local;
        local = [];
        for (const sp of all) (this.ownership.forwards(sp.traceId) ? foreign : local).push(sp);
      }
      const ex = local.length > SLICE_SPANS ? await this.processInSlices(local, now, source) : this.pipeline.process(local, now, source);
      local = [];
      let forwardLog: PendingTraceLog[] = [];
      if (foreign.length) {
        const fw = this.pipeline.forward(foreign, source);
        ex.receipts.push(...fw.receipts);
        ex.rejected.push(...fw.rejected);
        ex.dropped += fw.dropped;
        ex.agentIdsRefused += fw.agentIdsRefused;
        forwardLog = fw.forwardLog;
        foreign = [];
      }
      const rejected = ex.rejected.map((r) => r.reason);
      for (const r of ex.rejected) this.metrics.ingestRefused(r.code);
      if (ex.agentIdsRefused) this.metrics.ingestRefused('agent_id_invalid', ex.agentIdsRefused);
      // A wide export's span log is encoded in slices first: the trust rules and the commit then run in one turn, as before.
      const spanLog: SpanLogEntry[] = [];
      if (ex.pendingLog.length > SLICE_SPANS) await toSpanLogInSlices(ex.pendingLog, now, spanLog);
      else for (const e of toSpanLog(ex.pendingLog, now)) spanLog.push(e);
      for (const e of toSpanLog(forwardLog, now, true)) spanLog.push(e);
      const finish = () => {
        const { kept: receipts, refused } = this.trust(ex.receipts, source, bind);
        for (const r of refused) rejected.push(r.reason);
        if (ex.rejected.length) this.metrics.receipt('invalid', 'rejected', ex.rejected.length);
        const producing = spanCount - ex.dropped - ex.rejected.length;
        return this.spansCommitted(receipts, source, transport, { producing, dropped: ex.dropped, rejected }, spanLog);
      };
      // In a cluster with bound sources, the pins of runs held elsewhere are read before the trust rules run.
      if (this.sources !== UNBOUND && this.ownership.remote) return this.prepareTrust(ex.receipts).then(finish);
      return finish();
    }
  }

  /**
   * A wide export (say 200,000 single-span traces in one body) through the pipeline in slices of about SLICE_SPANS
   * spans of whole traces (a trace's spans are never split, and keep their order), yielding to the event loop between
   * slices once ~8 ms have passed: health checks and other requests are answered meanwhile. Each slice is what one
   * smaller export of those traces would be; the results are merged as one export's.
   */
  private async processInSlices(spans: readonly SpanRecord[], now: number, source: string): Promise<ReturnType<SpanPipeline['process']>> {
    const byTrace = new Map<string, SpanRecord[]>();
    for (const sp of spans) {
      const list = byTrace.get(sp.traceId);
      if (list) list.push(sp);
      else byTrace.set(sp.traceId, [sp]);
    }
    const out: ReturnType<SpanPipeline['process']> = { receipts: [], rejected: [], dropped: 0, pendingLog: [], agentIdsRefused: 0 };
    const run = (slice: SpanRecord[]) => {
      const ex = this.pipeline.process(slice, now, source);
      for (const r of ex.receipts) out.receipts.push(r);
      for (const r of ex.rejected) out.rejected.push(r);
      for (const l of ex.pendingLog) out.pendingLog.push(l);
      out.dropped += ex.dropped;
      out.agentIdsRefused += ex.agentIdsRefused;
    };
    let slice: SpanRecord[] = [];
    let started = performance.now();
    for (const list of byTrace.values()) {
      for (const sp of list) slice.push(sp);
      if (slice.length < SLICE_SPANS) continue;
      run(slice);
      slice = [];
      if (performance.now() - started > 8) {
        await yieldNow();
        started = performance.now();
      }
    }
    if (slice.length) run(slice);
    return out;
  }

  private async spansCommitted(
    receipts: Receipt[],
    source: string,
    transport: 'http' | 'grpc',
    spans: { producing: number; dropped: number; rejected: string[] },
    spanLog: SpanLogEntry[],
  ): Promise<SpanIngestResult> {
    const out = await this.commit(receipts, source, spanLog);
    const { dropped, rejected } = spans;
    // The spans of runs refused by a live cap, counted as their receipts (a span can make two, an agent's delegate and
    // return: an upper estimate), never more than the spans that made receipts.
    const limited = Math.min(out.refused?.receipts ?? 0, Math.max(0, spans.producing));
    const producing = spans.producing - limited;
    this.metrics.otlpSpans(transport, 'receipt', Math.max(0, producing));
    this.metrics.otlpSpans(transport, 'dropped', dropped);
    if (rejected.length + limited) this.metrics.otlpSpans(transport, 'rejected', rejected.length + limited);
    if (rejected.length === 0 && limited === 0) return { rejectedSpans: 0 };
    const why: string[] = [];
    if (limited) why.push(out.refused!.message);
    if (rejected.length) why.push(`${rejected.length} span(s) could not become valid receipts; first: ${rejected[0]}`);
    return { rejectedSpans: rejected.length + limited, errorMessage: why.join('; '), ...(limited ? { liveLimit: out.refused!.limit } : {}) };
  }

  /**
   * Receipts posted directly (NDJSON): each is checked against the sending token's binding first (refused:
   * `source_not_bound`), then the kept ones pass the trust rules (`trust`, with the pins of runs held elsewhere read
   * first in a cluster) and are committed. Refusal indexes point into `receipts`, in ascending order.
   */
  async consumeReceipts(receipts: Receipt[], from: IngestSource): Promise<ReceiptIngestResult> {
    const refusedIndexes: Refusal[] = [];
    const valid: Receipt[] = [];
    const validIndex: number[] = [];
    receipts.forEach((r, index) => {
      const why = from.bind?.(r);
      if (why) {
        refusedIndexes.push({ index, reason: why });
        this.metrics.receipt(r.type, 'rejected');
        this.metrics.ingestRefused('source_not_bound');
        return;
      }
      valid.push(r);
      validIndex.push(index);
    });
    // Run scope (run-level receipts and gaps from a bound token): src/ingest/trust.ts.
    await this.prepareTrust(valid);
    const { kept, refused } = this.trust(valid, from.source);
    for (const f of refused) refusedIndexes.push({ index: validIndex[f.index], reason: f.reason });
    if (refused.length) refusedIndexes.sort((a, b) => a.index - b.index);
    const out = await this.commit(kept, from.source);
    if (out.refused) {
      // Runs refused by a live cap: each of their receipts is refused by line, the rest was committed.
      const trustRefused = new Set(refused.map((f) => f.index));
      valid.forEach((r, i) => {
        if (trustRefused.has(i)) return;
        if (out.refused!.runs.has(r.run)) refusedIndexes.push({ index: validIndex[i], reason: out.refused!.message });
      });
      refusedIndexes.sort((a, b) => a.index - b.index);
    }
    return { accepted: out.accepted, duplicates: out.duplicates, conflicts: out.conflicts, refused: refusedIndexes, ...(out.refused ? { liveLimit: out.refused.limit } : {}) };
  }

  /**
   * Replay the span log after a restart: the logged spans go through the pipeline again (receipts they yield are
   * duplicates of stored ones, or new when their callers resolve among themselves); traces still pending are logged
   * anew, then the old entries are dropped. Entries are replayed in batches of `batch`, one commit per batch (not
   * one per entry), yielding to the event loop between batches so the listeners serve meanwhile; `replayProgress`
   * says how far it is (readiness). Returns how many entries were replayed.
   */
  async replaySpanLog(batch = REPLAY_BATCH): Promise<number> {
    const store = this.engine.store;
    const entries = store.spanLog();
    if (entries.length === 0) return 0;
    this.replaying = { done: 0, total: entries.length };
    try {
      for (let lo = 0; lo < entries.length; lo += batch) {
        const now = this.clock();
        const receipts: Receipt[] = [];
        const pending: PendingTraceLog[] = [];
        for (const e of entries.slice(lo, lo + batch)) {
          // Every field is validated again: an entry that does not read as logged spans (format 1 or 2, src/ingest/span-log.ts) is dropped.
          let spans: LoggedSpan[] = [];
          try {
            spans = decodeLoggedSpans(e.traceId, e.body) ?? [];
          } catch (err) {
            throw new Error(`store table span_log, row seq ${e.seq}: ${(err as Error).message}`);
          }
          if (spans.length === 0) continue;
          const ex = this.pipeline.replay(spans, now);
          for (const r of ex.rejected) this.metrics.ingestRefused(r.code);
          for (const r of ex.receipts) receipts.push(r);
          for (const l of ex.pendingLog) pending.push(l);
        }
        // Resolved receipts keep the binding of the sources that sent their spans before the restart.
        const { kept } = this.trust(receipts, 'auditor');
        await this.commit(kept, 'auditor', toSpanLog(pending, now), false);
        this.replaying.done = Math.min(lo + batch, entries.length);
        await new Promise<void>((r) => setImmediate(r));
      }
      store.deleteSpanLogUpTo(entries[entries.length - 1].seq);
    } finally {
      this.replaying = null;
    }
    return entries.length;
  }

  /** The span log replay under way (entries replayed of all), or null when none is. */
  get replayProgress(): { done: number; total: number } | null {
    return this.replaying ? { ...this.replaying } : null;
  }

  /**
   * Cluster with `--span-routing any`: the graphs of LangGraph roots that arrived before `before`, the start of a
   * read of the shared span log that is now done (every span sent before such a root is here by then). Their
   * receipts are committed like replayed ones, with the binding of the sources that sent the spans.
   */
  async readLangGraphRoots(before: number): Promise<number> {
    const ex = this.pipeline.readLangGraphRoots(before);
    for (const r of ex.rejected) this.metrics.ingestRefused(r.code);
    if (ex.agentIdsRefused) this.metrics.ingestRefused('agent_id_invalid', ex.agentIdsRefused);
    if (ex.receipts.length === 0) return 0;
    const { kept } = this.trust(ex.receipts, 'auditor');
    if (kept.length) await this.commit(kept, 'auditor', undefined, false);
    return kept.length;
  }

  /**
   * Forget logged spans of traces the pipeline no longer keeps: no pending work (resolved, or expired into gap
   * receipts) and a skeleton forgotten (quiet past the parent wait) or evicted.
   */
  pruneSpanLog(now: number, olderThanMs: number, slicer?: Slicer): Promise<number> {
    // Not while the span log is replayed: entries not replayed yet belong to no pending trace of the pipeline so far.
    if (this.replaying) return Promise.resolve(0);
    return this.engine.store.pruneSpanLog(now - olderThanMs, (t) => this.pipeline.keepsTrace(t), slicer);
  }

  /** Derived receipts produced by the timer (e.g. gap receipts of unresolved callers). */
  async internal(receipts: Receipt[]): Promise<void> {
    const { kept } = this.trust(receipts, 'auditor');
    if (kept.length) await this.commit(kept, 'auditor', undefined, false);
  }
}
