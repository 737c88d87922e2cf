// A TCP proxy the test owns, in front of Redis or PostgreSQL, so one test can cut its own
// connections without disturbing the services other test files share.
import net from 'node:net';

export interface Proxy {
  port: number;
  url(scheme: string, pathname?: string): string;
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

export async function startProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<Proxy> {
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
    url: (scheme, pathname = '') => `${scheme}://127.0.0.1:${port}${pathname}`,
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
export async function startFreezableProxy(targetPort: number) {
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
    const upstream = net.connect(targetPort, '127.0.0.1');
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
  return {
    port: (server.address() as net.AddressInfo).port,
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
