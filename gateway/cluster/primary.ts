// `intake gateway` with GATEWAY_PROCESSES > 1: a node:cluster primary that runs no gateway of
// its own. One Node process is bound to one core, and the gateway's HTTP parsing, Koa and
// checks are most of its cost, so N processes (each the whole gateway of gateway/server.ts,
// started by this same command) share one port and the machine's cores. The primary accepts
// connections and hands them out in turn (Node's round-robin policy), replaces a process that
// dies, answers scrapes with every process's metrics added up, and on SIGTERM/SIGINT lets each
// process drain as a single gateway does, exiting 0 once all have.
import cluster, { type Worker } from 'node:cluster';
import type { Config } from '../../platform/config.ts';
import type { Logger } from '../../platform/logger.ts';
import { gatewayHeapFlags, oldGenerationMb, youngGenerationMb } from '../heap-thread.ts';
import { createMetricsCollector } from './collect-metrics.ts';
import { isMessage, type ToPrimary, type ToProcess } from './messages.ts';
import { processConfig } from './share.ts';

/** A process that dies waits this long before it is replaced, doubling with each other death in the last minute, up to 30 s. */
export function restartDelayMs(deathsInLastMinute: number): number {
  return Math.min(30_000, 250 * 2 ** Math.max(0, deathsInLastMinute - 1));
}

const MINUTE_MS = 60_000;

/**
 * Each process's heap: its young generation as GATEWAY_SEMI_SPACE_MB asks (null: node's
 * default), its old generation capped for its share of the caches (gateway/heap-thread.ts), so
 * that each stays within the memory bound (docs/reliability.md) for its share; and the node
 * flags that give it, which a process reads at start-up.
 */
export function processHeap(config: Config): { youngGenerationMb: number | null; oldGenerationMb: number; flags: string[] } {
  const share = processConfig(config, config.gatewayProcesses);
  const cachesMb = share.identifyCacheMb + share.keyCacheMb;
  return {
    youngGenerationMb: config.gatewaySemiSpaceMb > 0 ? youngGenerationMb(config.gatewaySemiSpaceMb) : null,
    oldGenerationMb: oldGenerationMb(cachesMb),
    flags: gatewayHeapFlags(config.gatewaySemiSpaceMb, cachesMb),
  };
}

/** Runs until every process has stopped; resolves with the exit code of the command. */
export function runGatewayPrimary(config: Config, log: Logger): Promise<number> {
  const processes = config.gatewayProcesses;
  // The default exec and args: this same `intake gateway`. Structured clone carries metric values (NaN, +Inf) as they are.
  // Each process's heap as node flags (one process runs a thread instead: heap-thread.ts), after
  // this process's own: the last of a flag wins, over NODE_OPTIONS too.
  const heap = processHeap(config);
  cluster.setupPrimary({ serialization: 'advanced', execArgv: [...process.execArgv, ...heap.flags] });
  const listening = new Set<Worker>();
  const live = new Set<Worker>();
  const collector = createMetricsCollector();
  const deaths: number[] = [];
  const restarts = new Set<NodeJS.Timeout>();
  let port: number | null = null;
  let announced = false;
  let stopping = false;
  let failedStops = 0;

  return new Promise<number>((resolve) => {
    const finish = (code: number) => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve(code);
    };

    const fork = () => {
      // Every process computes its share (gateway/cluster/share.ts) from the same count, `auto` resolved once here.
      const worker = cluster.fork({ GATEWAY_PROCESSES: String(processes) });
      live.add(worker);
      worker.on('message', (message: unknown) => onMessage(worker, message));
      worker.on('exit', (code, signal) => onExit(worker, code, signal));
    };

    const onMessage = (worker: Worker, message: unknown) => {
      if (!isMessage<ToPrimary>(message)) return;
      if (message.type === 'intake:listening') onListening(worker, message.port);
      else if (message.type === 'intake:metrics-part') collector.received(message.id, message.metrics);
      else if (message.type === 'intake:metrics-request') {
        const reply = (answer: ToProcess) => worker.send(answer, () => {});
        collector.collect([...listening]).then(
          (text) => reply({ type: 'intake:metrics-result', id: message.id, text }),
          (err: Error) => reply({ type: 'intake:metrics-result', id: message.id, error: err.message }),
        );
      }
    };

    const onListening = (worker: Worker, at: number) => {
      listening.add(worker);
      if (port === null) {
        // The first process bound the port (or failed, alone, with one error line): now the others.
        port = at;
        for (let i = 1; i < processes; i++) fork();
      }
      if (announced) log.info({ processPid: worker.process.pid }, 'gateway process replaced');
      else if (listening.size === processes) {
        announced = true;
        // The one line tests and scripts wait for, as a single-process gateway prints it; the heap is each process's.
        log.info(
          {
            port,
            processes,
            processPids: [...listening].map((w) => w.process.pid),
            youngGenerationMb: heap.youngGenerationMb,
            oldGenerationMb: heap.oldGenerationMb,
          },
          'gateway listening',
        );
      }
    };

    const onExit = (worker: Worker, code: number | null, signal: string | null) => {
      live.delete(worker);
      listening.delete(worker);
      collector.forget(worker);
      if (stopping) {
        // A process killed by the forwarded SIGTERM before it could handle it was still starting: nothing was lost.
        if (code !== 0 && signal !== 'SIGTERM') failedStops++;
        if (live.size === 0) {
          log.info({ processes }, 'all gateway processes stopped');
          finish(failedStops ? 1 : 0);
        }
        return;
      }
      if (port === null) {
        // The first process could not start (a taken port, say): it printed why; so does the command.
        return finish(code || 1);
      }
      const now = Date.now();
      deaths.push(now);
      while (deaths[0] < now - MINUTE_MS) deaths.shift();
      const delay = restartDelayMs(deaths.length);
      log.error({ processPid: worker.process.pid, code, signal, restartInMs: delay }, 'gateway process exited unexpectedly; starting another');
      const timer = setTimeout(() => {
        restarts.delete(timer);
        fork();
      }, delay);
      restarts.add(timer);
    };

    const stop = (signal: NodeJS.Signals) => {
      // A second signal changes nothing; the timer below bounds the drain.
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'shutting down');
      for (const timer of restarts) clearTimeout(timer);
      // Each process drains as a single gateway does (answers in flight, flushes its batches).
      for (const worker of live) worker.process.kill('SIGTERM');
      if (live.size === 0) return finish(0);
      setTimeout(() => {
        log.error({ processPids: [...live].map((w) => w.process.pid) }, 'gateway processes took too long to stop; killing them');
        for (const worker of live) worker.process.kill('SIGKILL');
        finish(1);
      }, config.shutdownTimeoutMs + 10_000).unref();
    };

    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    fork();
  });
}
