import { Command } from 'ioredis';

/**
 * Lets an answered ioredis command drop its arguments.
 *
 * A Track job's command carries the job's ~24 KB of JSON. ioredis keeps the arguments on the
 * `Command` after Redis has answered it, and something the scavenger cannot see as dead keeps
 * answered commands alive until the next mark-compact. So every job's bytes were promoted to the
 * old generation, which made the gateway's scavenges ~4× slower and added mark-compacts: the
 * p95–p99 band of Track (docs/performance.md).
 *
 * ioredis reads a command's arguments again only before its answer: to write it, to resend it after
 * a reconnect or a cluster redirection, and to name it in an error. The one exception is a
 * pipeline (`multi`, `pipeline`, cluster auto-pipelining): a cluster pipeline redirected as a whole
 * sends all of its commands again, answered or not (`Pipeline.js`). So commands sent inside a
 * pipeline keep their arguments; every other command lets them go once it is resolved.
 *
 * ioredis has no option for this; the hook is its `Command._convertValue`, which wraps a command's
 * resolve. test/unit/redis-answered-commands.test.ts fails if an upgrade of ioredis changes it.
 */
export function releaseAnsweredCommandArguments(): void {
  const prototype = Command.prototype as unknown as CommandInternals;
  if (prototype[released]) return;
  const convertValue = prototype._convertValue;
  if (typeof convertValue !== 'function') {
    throw new Error("ioredis's Command has no _convertValue: platform/redis-answered-commands.ts needs a new hook");
  }
  prototype._convertValue = function (this: CommandInternals, resolve: (value: unknown) => void) {
    const settle = convertValue.call(this, resolve);
    return (value: unknown) => {
      const promise = settle(value);
      if (this.isResolved && this.pipelineIndex === undefined) this.args = NO_ARGUMENTS;
      return promise;
    };
  };
  prototype[released] = true;
}

const released = Symbol('intake.releasesAnsweredArguments');
const NO_ARGUMENTS: unknown[] = Object.freeze([]) as unknown as unknown[];

interface CommandInternals {
  args: unknown[];
  isResolved: boolean;
  pipelineIndex?: number;
  _convertValue: (this: CommandInternals, resolve: (value: unknown) => void) => (value: unknown) => unknown;
  [released]?: boolean;
}
