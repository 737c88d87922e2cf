import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on `port` (0: any free one) and resolves with the port taken; rejects on a taken port or an unknown host. */
export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Stops accepting, lets requests in flight finish (up to `timeoutMs`), then closes whatever is
 * left. Keep-alive connections go idle as their last response is sent: each is closed then.
 */
export async function drain(server: Server, timeoutMs: number): Promise<void> {
  const drained = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  server.closeIdleConnections();
  const deadline = new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref());
  await Promise.race([drained, deadline]);
  clearInterval(sweep);
  server.closeAllConnections();
}

/**
 * The handle of a listening server: `close()` drains it (`drain`), then releases what serves it;
 * a second call gets the first one's promise, so every part is closed once.
 */
export function drainable(server: Server, port: number, timeoutMs: number, release: () => Promise<void>): { port: number; close: () => Promise<void> } {
  let closing: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closing ??= (async () => {
        await drain(server, timeoutMs);
        await release();
      })()),
  };
}
