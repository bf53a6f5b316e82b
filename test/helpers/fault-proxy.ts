/**
 * A fault-injecting TCP proxy on loopback, for putting between one instance and PostgreSQL (issue 49). It forwards
 * bytes both ways and can, without ever sending a reset or a FIN:
 * - `stall()`: stop forwarding (bytes wait in the proxy; connections stay open and unanswered) until `resume()`,
 *   which delivers what waited, in order;
 * - `blackHole()`: every connection open now, and every new one until `heal()`, dies silently: its bytes are dropped,
 *   for ever (half-open from both ends). After `heal()` new connections are forwarded; the dead ones stay dead;
 * - `latency(ms, { except })`: delay every chunk by `ms` in each direction (order kept); 0 ends it. `except`: a marker
 *   of connection start-up messages (e.g. an application_name) whose connections are not delayed;
 * - `failOn(marker)`: the next statement sent whose bytes hold `marker` (SQL text, or a prepared statement's name)
 *   kills its connection at once, both ways (as a database restart does to its sessions), before PostgreSQL sees it;
 * - `holdOn(marker, meanwhile)`: the next statement sent whose bytes hold `marker` waits in the proxy until
 *   `meanwhile()` resolves (e.g. a restart of PostgreSQL), then goes on if its connection still lives.
 * Everything waiting is bounded (a connection holding more than MAX_WAITING bytes is destroyed).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { startPgCluster, type PgCluster } from './pg-cluster.js';
import type { ServerProcess } from './server.js';

const MAX_WAITING = 64 * 1024 * 1024;

export interface FaultProxy {
  port: number;
  /** `url` with its port replaced by the proxy's. */
  through(url: string): string;
  stall(): void;
  resume(): void;
  blackHole(): void;
  heal(): void;
  latency(ms: number, opts?: { except?: string }): void;
  failOn(marker: string): void;
  holdOn(marker: string, meanwhile: () => Promise<void>): void;
  /** Statements held by holdOn so far. */
  held(): number;
  /** Connections killed by failOn so far. */
  failed(): number;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

interface Direction {
  to: Socket;
  waiting: Buffer[];
  bytes: number;
  /** When (ms) the last delayed chunk is due: later chunks are never due before it. */
  lastDue: number;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  dead: boolean;
  /** The first bytes the client sent (its start-up message: user, database, application_name). */
  startup: string | null;
  up: Direction;
  down: Direction;
}

export async function startFaultProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<FaultProxy> {
  const pairs = new Set<Pair>();
  let stalled = false;
  let holing = false;
  let delayMs = 0;
  let undelayed: string | null = null;
  let hold: { marker: string; meanwhile: () => Promise<void> } | null = null;
  let holds = 0;
  let accepted = 0;
  let armed: string | null = null;
  let killed = 0;

  const send = (pair: Pair, d: Direction, chunk: Buffer): void => {
    if (pair.dead) return; // a black hole swallows everything
    if (stalled) {
      d.waiting.push(chunk);
      d.bytes += chunk.length;
      if (d.bytes > MAX_WAITING) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      return;
    }
    if (delayMs > 0 && !(undelayed !== null && pair.startup?.includes(undelayed))) {
      const due = Math.max(Date.now() + delayMs, d.lastDue);
      d.lastDue = due;
      setTimeout(() => {
        if (!pair.dead && !d.to.destroyed) d.to.write(chunk);
      }, due - Date.now());
      return;
    }
    d.to.write(chunk);
  };

  const server: Server = createServer((client) => {
    accepted++;
    const upstream = connect(targetPort, targetHost);
    const pair: Pair = {
      client,
      upstream,
      dead: holing,
      startup: null,
      up: { to: upstream, waiting: [], bytes: 0, lastDue: 0 },
      down: { to: client, waiting: [], bytes: 0, lastDue: 0 },
    };
    pairs.add(pair);
    client.on('data', (c: Buffer) => {
      pair.startup ??= c.toString('latin1', 0, Math.min(c.length, 1024));
      if (hold !== null && c.toString('latin1').includes(hold.marker)) {
        const { meanwhile } = hold;
        hold = null;
        holds++;
        client.pause();
        void meanwhile().finally(() => {
          if (client.destroyed || upstream.destroyed) return;
          send(pair, pair.up, c);
          client.resume();
        });
        return;
      }
      if (armed !== null && c.toString('latin1').includes(armed)) {
        armed = null;
        killed++;
        pairs.delete(pair);
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      send(pair, pair.up, c);
    });
    upstream.on('data', (c: Buffer) => send(pair, pair.down, c));
    const end = () => {
      // A dead connection says nothing to its other end (that is the fault: close() ends it); a live one passes the
      // close on.
      if (pair.dead) return;
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', () => {});
    upstream.on('error', () => {});
    client.on('close', end);
    upstream.on('close', end);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;

  const flush = (pair: Pair, d: Direction) => {
    const chunks = d.waiting;
    d.waiting = [];
    d.bytes = 0;
    for (const c of chunks) send(pair, d, c);
  };

  return {
    port,
    through: (url) => {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    stall: () => {
      stalled = true;
    },
    resume: () => {
      stalled = false;
      for (const pair of pairs) {
        flush(pair, pair.up);
        flush(pair, pair.down);
      }
    },
    blackHole: () => {
      holing = true;
      for (const pair of pairs) pair.dead = true;
    },
    heal: () => {
      holing = false;
    },
    latency: (ms, opts) => {
      delayMs = ms;
      undelayed = opts?.except ?? null;
    },
    holdOn: (marker, meanwhile) => {
      hold = { marker, meanwhile };
    },
    held: () => holds,
    connections: () => accepted,
    failOn: (marker) => {
      armed = marker;
    },
    failed: () => killed,
    close: async () => {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * For a describe block of cluster fault tests: a throwaway PostgreSQL started before its tests, and the servers and
 * proxies they started (registered in `running` and through `proxy()`) stopped after them.
 */
export function faultHarness(): { db: () => PgCluster; running: Set<ServerProcess>; proxy: () => Promise<FaultProxy> } {
  let db: PgCluster | undefined;
  const running = new Set<ServerProcess>();
  const proxies = new Set<FaultProxy>();
  beforeAll(async () => {
    db = await startPgCluster();
  }, 90_000);
  afterAll(async () => {
    await Promise.all([...running].map((s) => s.stop('SIGKILL')));
    for (const p of proxies) await p.close();
    await db?.stop();
  });
  return {
    db: () => db!,
    running,
    proxy: async () => {
      const p = await startFaultProxy(db!.port);
      proxies.add(p);
      return p;
    },
  };
}
