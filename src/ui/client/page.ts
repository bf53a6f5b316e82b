/** What the router (app.ts) gives a page and what a page gives back: its own module so pages need not import app.ts. */
import type { RunRow } from '../view.js';

export interface View {
  /** A run changed (verdict, findings or receipts). */
  onRun?(row: RunRow): void;
  /** Too much changed, or the stream reconnected: refetch. */
  onRefresh?(): void;
  dispose?(): void;
}

export interface Ctx {
  main: HTMLElement;
  navigate(url: string, opts?: { replace?: boolean }): void;
  setTitle(title: string): void;
}
