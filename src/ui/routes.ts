import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditEngine } from '../server/engine.js';

export type Route = (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean> | boolean;

/** The web view's routes (placeholder until the full view lands). */
export function createUiRoutes(_engine: AuditEngine): Route {
  return (_req, res, path) => {
    if (path !== '/') return false;
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>topology-audit</title><p>topology-audit: see <a href="/api/v1/runs">/api/v1/runs</a></p>');
    return true;
  };
}
