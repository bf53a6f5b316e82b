/** Yields to the event loop once ~8 ms of synchronous work passed since the last yield (the engine's long steps). */
export class Slicer {
  private since = performance.now();
  async yieldIfDue(): Promise<void> {
    if (performance.now() - this.since < 8) return;
    await new Promise<void>((r) => setImmediate(r));
    this.since = performance.now();
  }
}
