// A TCP proxy the test owns, in front of Redis or PostgreSQL, so one test can cut its own
// connections without disturbing the services other test files share.
import net from 'node:net';

/**
 * `base` with its host and port replaced by the proxy's: the scheme, credentials, database
 * number or name and query of TEST_REDIS_URL / TEST_DATABASE_URL (or of a gateway's URL) stay.
 */
export function throughProxy(base: string, port: number): string {
  const url = new URL(base);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  // libpq's socket directory would win over the host: the proxy listens on TCP only.
  url.searchParams.delete('host');
  return url.toString();
}

const DEFAULT_PORTS: Record<string, number> = { 'redis:': 6379, 'rediss:': 6379, 'postgresql:': 5432, 'postgres:': 5432, 'http:': 80 };

/** Where a service URL points: its host and port (the scheme's default port when it names none). */
export function targetOf(serviceUrl: string): { host: string; port: number } {
  const url = new URL(serviceUrl);
  const port = Number(url.port || DEFAULT_PORTS[url.protocol]);
  if (!port) throw new Error(`no port in ${url.protocol} URL and no default for its scheme`);
  return { host: url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port };
}

export interface Proxy {
  port: number;
  /** `base` (a URL of the service behind the proxy) as reached through the proxy: throughProxy(). */
  url(base: string): string;
  /** Drop every connection and refuse new ones (like a server that went away). */
  cut(): void;
  /** Accept connections but never forward a byte (like a server that hangs). */
  stall(): void;
  restore(): void;
  /** Round trips so far: bursts a client sent after the server last answered (the first included). */
  roundTrips(): number;
  resetRoundTrips(): void;
  close(): Promise<void>;
}

/** A proxy in front of `target`: a service URL (TEST_REDIS_URL, TEST_DATABASE_URL, a gateway's), or a port on 127.0.0.1. */
export async function startProxy(target: string | number): Promise<Proxy> {
  const { host: targetHost, port: targetPort } = typeof target === 'string' ? targetOf(target) : { host: '127.0.0.1', port: target };
  let mode: 'open' | 'cut' | 'stall' = 'open';
  let trips = 0;
  let answered = true;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    if (mode === 'cut') return client.destroy();
    if (mode === 'stall') return;
    const upstream = net.connect(targetPort, targetHost);
    sockets.add(upstream);
    upstream.on('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.on('data', () => {
      if (answered) trips++;
      answered = false;
    });
    upstream.on('data', () => (answered = true));
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const dropAll = () => {
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  return {
    port,
    url: (base) => throughProxy(base, port),
    cut() {
      mode = 'cut';
      dropAll();
    },
    stall() {
      mode = 'stall';
      dropAll();
    },
    restore() {
      mode = 'open';
      dropAll();
    },
    roundTrips: () => trips,
    resetRoundTrips: () => void (trips = 0),
    close: () =>
      new Promise<void>((resolve) => {
        dropAll();
        server.close(() => resolve());
      }),
  };
}

/**
 * Unlike the helper's stall(), which drops the open connections first, this keeps them and
 * just stops passing bytes: Redis (or the network) hangs under commands already sent, the
 * case the enqueue bound exists for.
 */
export async function startFreezableProxy(target: string) {
  const { host: targetHost, port: targetPort } = targetOf(target);
  let frozen = false;
  const held: (() => void)[] = [];
  const sockets = new Set<net.Socket>();
  const forward = (from: net.Socket, to: net.Socket) =>
    from.on('data', (chunk: Buffer) => {
      const write = () => {
        if (!to.destroyed) to.write(chunk);
      };
      if (frozen) held.push(write);
      else write();
    });
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: (base: string) => throughProxy(base, port),
    freeze() {
      frozen = true;
    },
    restore() {
      frozen = false;
      for (const write of held.splice(0)) write();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
