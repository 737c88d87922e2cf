// The Dockerfile, checked statically (no Docker engine runs here): stages, user, health check,
// no npm left behind in the image, and every path it copies present where it copies it from.
// Its HEALTHCHECK command runs for real against a compiled gateway in dist.test.ts.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { SOURCE_DIRS } from '../../bin/sources.js';
import { copyPaths, readDockerfile, type Instruction, type Stage } from '../helpers/dockerfile.ts';

const stages = readDockerfile('Dockerfile');
const runtime = stages.at(-1)!;
const ignored = dockerignore(readFileSync('.dockerignore', 'utf8'));

const of = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.keyword === keyword);
const runs = (stage: Stage) => of(stage, 'RUN').map((i) => i.rest);
const stageNamed = (name: string) => stages.find((s) => s.name === name);
/** A stage and the stages it is built FROM, nearest first. */
const lineage = (stage: Stage): Stage[] => {
  const parent = stageNamed(stage.base);
  return [stage, ...(parent ? lineage(parent) : [])];
};

test('multi-stage: the image is built from the base image, not from a stage with the dev dependencies or the npm upgrade', (t) => {
  t.true(stages.length >= 2, 'more than one stage');
  t.is(stageNamed(runtime.base), undefined, `the runtime stage starts FROM an image (${runtime.base}), not from a build stage`);
  // A maintained LTS line (22 or later), and one that package.json's engines names (the lines the CI runs).
  const major = Number(/^node:(\d+)[\w.-]*$/.exec(runtime.base)?.[1]);
  t.true(major >= 22 && major % 2 === 0, `an LTS line of Node.js still maintained: ${runtime.base}`);
  const engines: string = JSON.parse(readFileSync('package.json', 'utf8')).engines.node;
  t.true(
    engines.split('||').some((range) => range.trim().startsWith(`^${major}.`)),
    `package.json engines (${engines}) names Node.js ${major}`,
  );
  for (const stage of stages) if (!stageNamed(stage.base)) t.is(stage.base, runtime.base, `stage ${stage.name ?? '?'} builds on the same Node.js`);
  t.deepEqual(
    runs(runtime).filter((r) => /\bnpm\b/.test(r)),
    [],
    'the image runs no npm: no upgrade, no install, no cache in it',
  );
  t.false(
    lineage(runtime).some((s) => runs(s).some((r) => /npm install -g/.test(r))),
    'no npm upgrade in the image or below it',
  );
});

test('the runtime stage holds production dependencies and compiled code, copied from the stages that make them', (t) => {
  const copies = of(runtime, 'COPY').map((c) => ({ from: c.flags.from, ...copyPaths(c) }));
  const modules = copies.find((c) => c.dest.replace(/\/$/, '').endsWith('node_modules'));
  t.truthy(modules?.from, 'node_modules comes from another stage');
  const deps = stageNamed(modules!.from!)!;
  t.true(
    lineage(deps).some((s) => runs(s).some((r) => /npm ci\b.*--omit=dev/.test(r))),
    'installed with --omit=dev',
  );
  const dist = copies.find((c) => c.dest.replace(/\/$/, '').endsWith('dist'));
  t.truthy(dist?.from, 'dist comes from another stage');
  t.true(
    runs(stageNamed(dist!.from!)!).some((r) => /npm run build/.test(r)),
    'compiled by npm run build',
  );
  // What bin/intake.js needs beside dist: itself, package.json ("type": "module") and prisma/ for migrate.
  const local = copies.filter((c) => !c.from).flatMap((c) => c.sources);
  for (const needed of ['bin', 'package.json', 'prisma']) t.true(local.includes(needed), `${needed} is copied`);
  for (const source of SOURCE_DIRS) t.false(local.includes(source), `no TypeScript sources (${source})`);
});

test('the image runs as a non-root user and has a HEALTHCHECK', (t) => {
  const users = of(runtime, 'USER');
  t.true(users.length > 0, 'USER is set');
  t.notRegex(users.at(-1)!.rest, /^(root|0)(:|$)/);
  const checks = of(runtime, 'HEALTHCHECK');
  t.is(checks.length, 1);
  t.regex(checks[0]!.rest, /^CMD\s+\[/, 'a command in exec form');
  t.regex(checks[0]!.rest, /\/readyz/, "the gateway's readiness (the image's default role)");
  t.deepEqual(of(runtime, 'CMD').at(-1)!.rest, '["node", "bin/intake.js", "gateway"]');
});

test('every path a COPY takes from the build context exists and is not excluded by .dockerignore', (t) => {
  let checked = 0;
  for (const stage of stages) {
    for (const copy of of(stage, 'COPY').filter((c) => !c.flags.from)) {
      for (const source of copyPaths(copy).sources) {
        t.true(existsSync(source), `${source} exists`);
        t.false(ignored(source), `${source} is not in .dockerignore`);
        checked++;
      }
    }
  }
  t.true(checked > 5);
});

test('every path a COPY --from takes exists in that stage (copied into it, or made by its npm ci, build or client generation)', (t) => {
  for (const stage of stages) {
    for (const copy of of(stage, 'COPY').filter((c) => c.flags.from)) {
      const from = stageNamed(copy.flags.from!);
      t.truthy(from, `stage ${copy.flags.from} exists`);
      const made = madeIn(from!);
      for (const source of copyPaths(copy).sources) t.true(made.has(source), `${source} is made in stage ${copy.flags.from} (${[...made].join(', ')})`);
    }
  }
});

test('.dockerignore keeps out what the build must make itself or must not see', (t) => {
  for (const p of ['node_modules', 'dist', 'platform/generated', '.env', 'test', '.git']) t.true(ignored(p), p);
  for (const p of ['package.json', 'cli/intake.ts', 'clients/typescript/src/index.ts', 'prisma/migrations']) t.false(ignored(p), p);
});

/** Absolute paths (under WORKDIR) that exist in a stage after its instructions. */
function madeIn(stage: Stage): Set<string> {
  const made = new Set<string>();
  let workdir = '/';
  for (const s of lineage(stage).reverse()) {
    for (const i of s.instructions) {
      if (i.keyword === 'WORKDIR') workdir = path.posix.resolve(workdir, i.rest);
      if (i.keyword === 'COPY') {
        const { sources, dest } = copyPaths(i);
        const target = path.posix.resolve(workdir, dest);
        for (const source of sources) made.add(sources.length > 1 || dest.endsWith('/') ? path.posix.join(target, path.posix.basename(source)) : target);
      }
      if (i.keyword === 'RUN') for (const p of madeByRun(i)) made.add(path.posix.resolve(workdir, p));
    }
  }
  return made;
}

function madeByRun(run: Instruction): string[] {
  return [
    ...(/\bnpm ci\b/.test(run.rest) ? ['node_modules'] : []),
    ...(/\bnpm run build\b/.test(run.rest) ? ['dist'] : []),
    ...(/generate-client/.test(run.rest) ? ['platform/generated'] : []),
  ];
}

/** Docker's rule: a pattern matches a path from the context root (`*` within one segment, `**` across), or any folder above it; the last matching line wins. */
function dockerignore(text: string): (p: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negated = l.startsWith('!');
      const pattern = path.posix.normalize(l.slice(negated ? 1 : 0)).replace(/^\/+/, '');
      const body = pattern
        .split(/(\*\*|\*|\?)/)
        .map((part) => (part === '**' ? '.*' : part === '*' ? '[^/]*' : part === '?' ? '[^/]' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
        .join('');
      return { negated, regex: new RegExp(`^${body}$`) };
    });
  return (p) => {
    const segments = path.posix.normalize(p).split('/');
    const candidates = segments.map((_, i) => segments.slice(0, i + 1).join('/'));
    let result = false;
    for (const rule of rules) if (candidates.some((c) => rule.regex.test(c))) result = !rule.negated;
    return result;
  };
}
