/**
 * The one error every OTLP decoder throws for malformed input. Its message names the place (byte offset, field
 * number, JSON path) and the problem, never any byte or text of the payload, so it is safe to log and to return.
 */
export class OtlpDecodeError extends Error {
  override readonly name = 'OtlpDecodeError';
}
