/** Acknowledgements: who may be named and what a reason may hold (the same checks on the CLI and the API). */
import { ACK_REASON_MAX } from './types.js';

/** Who may be named as acknowledging: an identity, not free text. */
export const ACK_BY = /^[A-Za-z0-9._@-]{1,64}$/;

/** Why an ack reason is refused, or null: operator text, at most ACK_REASON_MAX characters, no control characters. */
export function ackReasonProblem(reason: string): string | null {
  if ([...reason].length > ACK_REASON_MAX) return `at most ${ACK_REASON_MAX} characters`;
  if (/[\u0000-\u001f\u007f]/.test(reason)) return 'no control characters (one line of text)';
  return null;
}

