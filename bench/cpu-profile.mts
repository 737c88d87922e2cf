// Where a process's CPU time went, from a V8 .cpuprofile (`node --cpu-prof`): self time
// summed per package (node_modules), per intake file, and per function.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Profile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

export function summarizeProfile(file: string, top = 25): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const byOwner = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const frame = frames.get(id)!;
    // Idle time is waiting (for load, for Redis), not cost: shares are of busy time.
    if (frame.functionName === '(idle)') return void (idle += us);
    const url = frame.url.includes('/node_modules/')
      ? 'npm:' + frame.url.slice(frame.url.lastIndexOf('/node_modules/') + 14)
      : frame.url.startsWith('file://')
        ? path.relative(root, fileURLToPath(frame.url))
        : frame.url;
    const owner = url.startsWith('npm:')
      ? url
          .split('/')
          .slice(0, url.startsWith('npm:@') ? 2 : 1)
          .join('/')
      : url.startsWith('node:')
        ? 'node (internal)'
        : url || frame.functionName;
    total += us;
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + us);
    const fn = `${frame.functionName || '(anonymous)'} ${url}:${frame.lineNumber + 1}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  });
  const list = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => `${((100 * us) / total).toFixed(1).padStart(5)} %  ${k}`)
      .join('\n');
  return `CPU profile ${file}: ${Math.round(total / 1000)} ms busy, ${Math.round(idle / 1000)} ms idle\n\nself time by owner:\n${list(byOwner)}\n\nself time by function:\n${list(byFunction)}`;
}
