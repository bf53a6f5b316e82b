import type { IncomingMessage, ServerResponse } from 'node:http';

/** The web view's routes; replaced by the full view. */
export async function uiRoutes(_req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> {
  if (path !== '/') return false;
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end('<!doctype html><title>topology-audit</title><p>topology-audit: see <a href="/api/v1/runs">/api/v1/runs</a></p>');
  return true;
}
