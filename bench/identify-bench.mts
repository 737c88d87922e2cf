// The Identify and Profiles scenarios of `npm run bench`: intake against its own naive
// reference (bench/identify-reference.ts: Koa + one pg upsert per Identify, one SELECT per
// Profiles read) in the same run, alternating rounds, medians compared.
import type { ChildProcess } from 'node:child_process';
import { perRequest, withCpu, type CpuSample } from './cpu-usage.mts';
import { medianRound, roundsText } from './medians.mts';

type LoadResult = { reqPerSec: number; p50: number; p99: number; errors: number; ok: number; duration: number };
/** A wrk load of one of bench/wrk's scripts, with the environment it reads. */
type Wrk = (url: string, script: string, env: Record<string, string>) => Promise<LoadResult>;

export interface IdentifyBenchDeps {
  base: string;
  /** The intake gateway's process (its CPU per request is reported). */
  gatewayPid: number;
  slug: string;
  apiKey: string;
  databaseUrl: string;
  rounds: number;
  want: (name: string) => boolean;
  wrk: Wrk;
  start: (args: string[], env: Record<string, string>, ready: RegExp) => Promise<{ child: ChildProcess; port: number }>;
  stop: (child: ChildProcess) => Promise<void>;
  report: (row: { scenario: string; [figure: string]: string | number }) => void;
  /** How many users intake's Identify rounds reached. */
  identifiedUsers: () => Promise<number>;
}

const USERS = 10_000;

export async function benchIdentifyAndProfiles(d: IdentifyBenchDeps): Promise<void> {
  const ref = await d.start(['--import', 'tsx', 'bench/identify-reference.ts'], { DATABASE_URL: d.databaseUrl, PORT: '3198' }, /reference listening/);
  const refBase = 'http://127.0.0.1:3198';
  const runId = `${d.slug}-${Date.now()}`;
  // Inside the 5-minute bound of the whole run.
  const timestamp = new Date().toISOString();
  try {
    // Identify first (it creates the profiles the reads need), then the reads.
    const scenarios = [
      {
        name: 'identify',
        label: 'Identify (10K users, 4 traits + timestamp, new messageId each)',
        refLabel: 'reference: Koa + one pg upsert `fields || $traits` per request',
        // Segment-shaped calls: a new messageId each, four traits and a timestamp, over 10,000 users.
        run: (url: string, key: string, tag: string) =>
          d.wrk(`${url}/api/identify/${d.slug}`, 'identify.lua', { BENCH_RUN_ID: `${runId}-${tag}`, BENCH_API_KEY: key, BENCH_TIMESTAMP: timestamp }),
      },
      {
        name: 'profiles',
        label: 'Profiles reads',
        refLabel: 'reference: Koa + one pg SELECT per request',
        // user-1 … user-N in turn: the Identify rounds number their calls from 1.
        run: async (url: string, key: string) => {
          const users = Math.max(1, Math.min(USERS, (await d.identifiedUsers()) - 100));
          return d.wrk(`${url}/api/profiles/${d.slug}/`, 'profiles.lua', { BENCH_API_KEY: key, BENCH_USERS: String(users) });
        },
      },
    ];
    for (const s of scenarios) {
      if (!d.want(s.name) && !(s.name === 'identify' && d.want('profiles'))) continue;
      await s.run(refBase, '', 'warm-ref');
      await s.run(d.base, d.apiKey, 'warm');
      type Measured = LoadResult & { cpu: CpuSample };
      const refRuns: Measured[] = [];
      const runs: Measured[] = [];
      for (let round = 0; round < d.rounds; round++) {
        refRuns.push(await withCpu(ref.child.pid!, () => s.run(refBase, '', `ref${round}`)));
        runs.push(await withCpu(d.gatewayPid, () => s.run(d.base, d.apiKey, `r${round}`)));
      }
      if (!d.want(s.name)) continue;
      const r = medianRound(runs);
      const rr = medianRound(refRuns);
      d.report({
        scenario: s.refLabel,
        'req/s': rr.reqPerSec,
        'p50 ms': rr.p50,
        'p99 ms': rr.p99,
        errors: rr.errors,
        'CPU ms/req server / pg / redis': perRequest(rr.cpu, rr.ok),
        runs: roundsText(refRuns),
      });
      d.report({
        scenario: `intake ${s.label}`,
        'req/s': r.reqPerSec,
        'p50 ms': r.p50,
        'p99 ms': r.p99,
        errors: r.errors,
        'x reference': Math.round((r.reqPerSec / rr.reqPerSec) * 100) / 100,
        'CPU ms/req server / pg / redis': perRequest(r.cpu, r.ok),
        runs: roundsText(runs),
      });
    }
  } finally {
    await d.stop(ref.child);
  }
}
