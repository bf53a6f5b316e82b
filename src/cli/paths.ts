import { fileURLToPath } from 'node:url';

/** The contracts/ directory shipped with the package (dist/cli/ or src/cli/ -> ../../contracts), whatever the cwd. */
export function packagedContractsDir(): string {
  return fileURLToPath(new URL('../../contracts/', import.meta.url)).replace(/\/$/, '');
}
