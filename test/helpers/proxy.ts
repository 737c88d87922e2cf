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
  close(): Promise<void>;
}

export async function startProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<Proxy> {
  let mode: 'open' | 'cut' | 'stall' = 'open';
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
    close: () =>
      new Promise<void>((resolve) => {
        dropAll();
        server.close(() => resolve());
      }),
  };
}
