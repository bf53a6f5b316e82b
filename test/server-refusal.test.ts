// Every refusal of an ingest request is one classified error (src/audit/consumer.ts), mapped to a status once per
// transport (src/server/refusal.ts).
import { describe, expect, it } from 'vitest';
import { ConsumeError, classify } from '../src/audit/consumer.js';
import { LiveLimitError } from '../src/audit/engine.js';
import { grpcRefusal, httpRefusal } from '../src/server/refusal.js';

describe('ingest refusals', () => {
  it('maps each kind to its HTTP status, headers and metric reason', () => {
    expect(httpRefusal(ConsumeError.saturated(), 7)).toMatchObject({ status: 429, reason: 'saturated', headers: { 'retry-after': '7' } });
    expect(httpRefusal(new ConsumeError('store_unavailable', 'x'), 7)).toMatchObject({ status: 503, reason: 'store_unavailable', headers: { 'retry-after': '7' } });
    expect(httpRefusal(new LiveLimitError('runs', 'full', 30), 7)).toMatchObject({ status: 503, reason: 'live_limit', limit: 'runs', headers: { 'retry-after': '30' } });
    expect(httpRefusal(new ConsumeError('unauthenticated', 'x'), 7)).toMatchObject({ status: 401, grpcCode: 16, headers: { 'www-authenticate': 'Bearer' } });
    expect(httpRefusal(new ConsumeError('too_large', 'x'), 7)).toMatchObject({ status: 413, reason: 'too_large', headers: {} });
    expect(httpRefusal(new ConsumeError('bad_content_type', 'x'), 7).status).toBe(415);
    expect(httpRefusal(new ConsumeError('undecodable', 'x'), 7)).toMatchObject({ status: 400, reason: 'undecodable' });
    const bad = httpRefusal(new ConsumeError('bad_request', 'x'), 7);
    expect(bad.status).toBe(400);
    expect(bad.reason).toBeUndefined();
    expect(httpRefusal(new Error('boom'), 7)).toMatchObject({ status: 500, message: 'internal error' });
  });

  it('maps each kind to its gRPC status and metadata; a framing error keeps the status the protocol asks for', () => {
    expect(grpcRefusal(ConsumeError.saturated())).toMatchObject({ status: 'UNAVAILABLE', code: 14, metadata: {} });
    expect(grpcRefusal(new LiveLimitError('receipts', 'full', 30))).toMatchObject({ status: 'UNAVAILABLE', reason: 'live_limit', limit: 'receipts', metadata: { 'retry-after': '30' } });
    expect(grpcRefusal(new ConsumeError('unauthenticated', 'x'))).toMatchObject({ status: 'UNAUTHENTICATED', code: 16 });
    expect(grpcRefusal(new ConsumeError('too_large', 'x'))).toMatchObject({ status: 'RESOURCE_EXHAUSTED', code: 8 });
    expect(grpcRefusal(new ConsumeError('undecodable', 'x', { grpcStatus: 'UNIMPLEMENTED' }))).toMatchObject({ status: 'UNIMPLEMENTED', code: 12, reason: 'undecodable' });
    expect(grpcRefusal(new TypeError('boom'))).toMatchObject({ status: 'INTERNAL', code: 13 });
  });

  it('classes: retryable, limit, permanent', () => {
    expect(ConsumeError.saturated().retryable).toBe(true);
    expect(classify(new LiveLimitError('runs', 'full'))?.errorClass).toBe('limit');
    expect(new ConsumeError('undecodable', 'x').retryable).toBe(false);
    expect(classify(new Error('x'))).toBeNull();
  });
});
