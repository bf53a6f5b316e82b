/** The receipt schema and the id and time rules it is built from: @topology-audit/receipt (packages/receipt), pure, shared with the emitter. */
export * from '@topology-audit/receipt';
