/**
 * A count of the work handoff audits do, for tests (test/handoff-incremental.test.ts): receipts walked and attempts
 * traced by the audit of a run. Only ever incremented; read as a difference around the work measured. It holds no
 * content and decides nothing.
 */
export const handoffWork = { steps: 0 };
