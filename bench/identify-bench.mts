// The Identify and Profiles scenarios of `npm run bench`: intake against its own naive
// reference (bench/identify-reference.ts: Koa + one pg upsert per Identify, one SELECT per
// Profiles read) in the same run, alternating rounds, medians compared.
import type { ChildProcess } from 'node:child_process';

type LoadResult = { reqPerSec: number; p50: number; p99: number; errors: number; ok: number; duration: number };
type Load = (url: string, opts: { headers?: Record<string, string>; requests?: unknown[]; method?: 'GET' | 'POST'; duration?: number }) => Promise<LoadResult>;

export interface IdentifyBenchDeps {
  base: string;
  slug: string;
  headers: Record<string, string>;
  databaseUrl: string;
  rounds: number;
  want: (name: string) => boolean;
  load: Load;
  start: (args: string[], env: Record<string, string>, ready: RegExp) => Promise<{ child: ChildProcess; port: number }>;
  stop: (child: ChildProcess) => Promise<void>;
  report: (row: { scenario: string; [figure: string]: string | number }) => void;
  /** How many users intake's Identify rounds reached. */
  identifiedUsers: () => Promise<number>;
}

const USERS = 10_000;

/** Segment-shaped identify calls: a new messageId each, four traits and a timestamp, over 10,000 users. */
function identifyRequests(runId: string, timestamp: string) {
  let n = 0;
  return [
    {
      method: 'POST' as const,
      setupRequest: (req: { body?: string }) => {
        n++;
        const user = n % USERS;
        req.body = `{"type":"identify","messageId":"${runId}-${n}","userId":"user-${user}","timestamp":"${timestamp}","traits":{"name":"User ${user}","plan":"p${n % 7}","visits":${n},"email":"user${user}@shop.io"}}`;
        return req;
      },
    },
  ];
}

/** user-1 … user-N: the Identify rounds number their calls from 1 (user-0 only exists past 10,000 calls). */
function readRequests(slug: string, users: number) {
  let n = 0;
  return [{ method: 'GET' as const, setupRequest: (req: { path?: string }) => ((req.path = `/api/profiles/${slug}/user-${(n++ % users) + 1}`), req) }];
}

function median<T extends { reqPerSec: number }>(runs: T[]): T {
  return [...runs].sort((a, b) => a.reqPerSec - b.reqPerSec)[Math.floor(runs.length / 2)];
}

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
        run: (url: string, headers: Record<string, string>, tag: string) =>
          d.load(`${url}/api/identify/${d.slug}`, { headers, requests: identifyRequests(`${runId}-${tag}`, timestamp) }),
      },
      {
        name: 'profiles',
        label: 'Profiles reads',
        refLabel: 'reference: Koa + one pg SELECT per request',
        run: async (url: string, headers: Record<string, string>) => {
          const users = Math.max(1, Math.min(USERS, (await d.identifiedUsers()) - 100));
          return d.load(`${url}/api/profiles/${d.slug}/user-0`, { headers, requests: readRequests(d.slug, users), method: 'GET' });
        },
      },
    ];
    for (const s of scenarios) {
      if (!d.want(s.name) && !(s.name === 'identify' && d.want('profiles'))) continue;
      await s.run(refBase, {}, 'warm-ref');
      await s.run(d.base, d.headers, 'warm');
      const refRuns: LoadResult[] = [];
      const runs: LoadResult[] = [];
      for (let round = 0; round < d.rounds; round++) {
        refRuns.push(await s.run(refBase, {}, `ref${round}`));
        runs.push(await s.run(d.base, d.headers, `r${round}`));
      }
      if (!d.want(s.name)) continue;
      const r = median(runs);
      const rr = median(refRuns);
      d.report({ scenario: s.refLabel, 'req/s': rr.reqPerSec, 'p50 ms': rr.p50, 'p99 ms': rr.p99, errors: rr.errors, runs: refRuns.map((x) => x.reqPerSec).join(' / ') });
      d.report({
        scenario: `intake ${s.label}`,
        'req/s': r.reqPerSec,
        'p50 ms': r.p50,
        'p99 ms': r.p99,
        errors: r.errors,
        'x reference': Math.round((r.reqPerSec / rr.reqPerSec) * 100) / 100,
        runs: runs.map((x) => x.reqPerSec).join(' / '),
      });
    }
  } finally {
    await d.stop(ref.child);
  }
}
