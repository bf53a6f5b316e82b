import { fileURLToPath } from 'node:url';

/** The contracts/ directory shipped with the package (dist/cli/ or src/cli/ -> ../../contracts), whatever the cwd. */
export function packagedContractsDir(): string {
  return fileURLToPath(new URL('../../contracts/', import.meta.url)).replace(/\/$/, '');
}

/** The Prometheus rules shipped with the package (their runbooks are served on /runbooks). */
export function packagedRulesFile(): string {
  return fileURLToPath(new URL('../../collector/prometheus/topology-audit.rules.yml', import.meta.url));
}
