// A lingering close (nginx's lingering_close) for a connection whose request body was refused
// unread. Node's server closes the socket once an answer with `Connection: close` is written;
// closing a socket that still holds unread bytes makes the kernel reset the connection, and a
// reset can discard the answer before the client has read it: node:http then reports EPIPE or
// ECONNRESET instead of the 413. So the answer goes out with a FIN, the gateway reads on and
// drops what still arrives, and closes once the client has closed its side, or after `ms`, or
// past `bytes`, whichever comes first.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

export interface LingerBounds {
  ms: number;
  bytes: number;
}

/** Up to five seconds and 32 MiB: a body a few times over the limits, over a slow link. */
export const LINGER: LingerBounds = { ms: 5_000, bytes: 32 * 1_048_576 };

const CHECK_MS = 100;

/** Called before the answer is written: the socket Node will close after it lingers instead. */
export function lingerAfterAnswer(req: IncomingMessage, bounds: LingerBounds = LINGER): void {
  const socket = req.socket as Socket & { destroySoon(): void };
  socket.destroySoon = () => linger(socket, bounds);
}

function linger(socket: Socket, bounds: LingerBounds): void {
  if (socket.destroyed) return;
  // The answer is written, then the FIN; the reading side stays open.
  socket.end();
  const from = socket.bytesRead;
  const started = Date.now();
  // What arrives goes to the HTTP parser, which drops a body once its request is answered; the
  // request stream may have been paused, which stopped the socket's reading.
  const check = setInterval(() => {
    if (Date.now() - started >= bounds.ms || socket.bytesRead - from > bounds.bytes) socket.destroy();
  }, CHECK_MS);
  check.unref();
  socket.once('end', () => socket.destroy());
  socket.once('close', () => clearInterval(check));
  socket.resume();
}
