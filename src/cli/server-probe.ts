/** Is `base` a topology-audit API? Every auditor answer carries `x-topology-audit: <port role>`; /healthz also names the service. */
export class ServerUnusable extends Error {}

export const AUDITOR_HEADER = 'x-topology-audit';

export async function probeAuditor(base: string, timeoutMs = 10_000): Promise<{ version?: string }> {
  let res: Response;
  try {
    res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw new ServerUnusable(`server ${base} unreachable: ${(e as Error).cause instanceof Error ? ((e as Error).cause as Error).message : (e as Error).message}`);
  }
  const role = res.headers.get(AUDITOR_HEADER);
  const text = await res.text().catch(() => '');
  let body: { service?: string; version?: string } = {};
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  if (role === 'api' && res.status === 200 && body.service === 'topology-audit') return { version: body.version };
  if (role === 'otlp-http') throw new ServerUnusable(`${base} is the auditor's OTLP/HTTP receiver, not its API; point --server at serve's --port (default 9464)`);
  throw new ServerUnusable(`${base} is not a topology-audit API (GET /healthz answered ${res.status}${role ? '' : ' without the x-topology-audit header'}); point --server at serve's --port (default 9464)`);
}
