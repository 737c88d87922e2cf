// CPU time a load round cost, read from /proc: the server process and every PostgreSQL and
// Redis server process. Per request, it says where each server's limit lies, whatever the
// machine's drift does to throughput.
import { readdirSync, readFileSync } from 'node:fs';

const TICK_MS = 10; // USER_HZ is 100 on Linux

function cpuMsOf(pid: number): number {
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0; // gone meanwhile
  }
}

/** Processes whose /proc/<pid>/<file> passes `test`. */
function pidsWhere(file: 'comm' | 'stat', test: (text: string) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (test(readFileSync(`/proc/${entry}/${file}`, 'utf8'))) pids.push(Number(entry));
    } catch {
      // exited
    }
  }
  return pids;
}

const pidsNamed = (name: string) => pidsWhere('comm', (comm) => comm.trim().startsWith(name));

/** The server and its children: a multi-process gateway (GATEWAY_PROCESSES) does its work in the processes its primary forked. */
export const serverPids = (pid: number) => [pid, ...pidsWhere('stat', (stat) => Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid)];

export interface CpuSample {
  server: number;
  postgres: number;
  redis: number;
}

type Times = Map<number, number>;

const timesOf = (pids: number[]): Times => new Map(pids.map((pid) => [pid, cpuMsOf(pid)]));

/** CPU spent between two readings by the processes alive at the second (a new one counts whole). */
function spent(before: Times, after: Times): number {
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

/** Runs `work` and returns its result with the CPU milliseconds each side spent meanwhile. */
export async function withCpu<T>(serverPid: number, work: () => Promise<T>): Promise<T & { cpu: CpuSample }> {
  const read = () => ({ server: timesOf(serverPids(serverPid)), postgres: timesOf(pidsNamed('postgres')), redis: timesOf(pidsNamed('redis-server')) });
  const before = read();
  const result = await work();
  const after = read();
  return {
    ...result,
    cpu: { server: spent(before.server, after.server), postgres: spent(before.postgres, after.postgres), redis: spent(before.redis, after.redis) },
  };
}

/** "0.41 / 0.22 / 0.05": CPU ms per request of the server, PostgreSQL and Redis. */
export function perRequest(cpu: CpuSample, requests: number): string {
  const f = (ms: number) => (requests ? (ms / requests).toFixed(3) : '-');
  return `${f(cpu.server)} / ${f(cpu.postgres)} / ${f(cpu.redis)}`;
}
