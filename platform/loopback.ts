// Which addresses are this host's loopback: the dashboard listens without a password only there,
// and its session cookie drops Secure only for plain HTTP to one of them.
import { BlockList, isIP } from 'node:net';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** 127.0.0.0/8, ::1 (in any spelling, IPv4-mapped too) and `localhost`; any other name or address may be reachable from elsewhere. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  const family = isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 4 ? 'ipv4' : 'ipv6');
}
