/**
 * Whether a stored pin still governs a run: the one rule for "does a later run.start override the stored pin".
 * A stored pin is never changed; it holds while no run.start names another pin. A reference names the pin when its
 * contract is the pin's and its version and phase, where given, are the pin's (an omitted one means the pin's).
 */
import type { Pin } from './types.js';

/** The parts of a run.start (or a PinRef) that name a pin. */
export interface PinNaming {
  contract?: string;
  version?: string;
  phase?: string;
}

/** Whether `ref` names `pin` (omitted version or phase: the pin's). */
export function namesPin(ref: PinNaming, pin: Pin): boolean {
  return ref.contract === pin.contract && (ref.version ?? pin.version) === pin.version && (ref.phase ?? pin.phase) === pin.phase;
}

/** Whether the stored `pin` governs a run whose earliest run.start is `start` (none: it governs). */
export function pinGoverns(start: PinNaming | null | undefined, pin: Pin): boolean {
  return !start || namesPin(start, pin);
}
