// clients/typescript is a package of its own: it builds with its own tsconfig, has no runtime
// dependency, and plain Node 20 (no tsx) imports it by name and calls a real gateway with it.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test from 'ava';
import { gatewayInProcess } from '../helpers/processes.ts';
import { newTenant, openHarness } from '../helpers/services.ts';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PACKAGE = path.join(ROOT, 'clients/typescript');

test('builds, has no runtime dependency, and `import` (ESM) and `require` (CommonJS) of "@intake/client" work in plain Node', async (t) => {
  const manifest = JSON.parse(readFileSync(path.join(PACKAGE, 'package.json'), 'utf8'));
  t.is(manifest.name, '@intake/client');
  t.is(manifest.dependencies, undefined, 'Node 20 standard library only');

  const dir = mkdtempSync(path.join(tmpdir(), 'intake-client-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const installed = path.join(dir, 'node_modules/@intake/client');
  mkdirSync(installed, { recursive: true });
  await run(path.join(ROOT, 'node_modules/.bin/tsc'), ['-p', path.join(PACKAGE, 'tsconfig.json'), '--outDir', path.join(installed, 'dist')]);
  cpSync(path.join(PACKAGE, 'package.json'), path.join(installed, 'package.json'));

  const h = await openHarness();
  t.teardown(() => h.close());
  const tenant = await newTenant(h);
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const script = `
    import { createClient } from '@intake/client';
    const intake = createClient({ baseUrl: process.env.URL, orgSlug: process.env.SLUG, apiKey: process.env.KEY });
    const r = await intake.identify({ userId: 'plain-node', traits: { ok: true } });
    const p = await intake.getProfile('plain-node');
    intake.close();
    console.log(JSON.stringify({ duplicate: r.duplicate, fields: p.fields }));`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
    cwd: dir,
    env: { PATH: process.env.PATH, URL: gateway.url, SLUG: tenant.slug, KEY: tenant.key },
  });
  t.deepEqual(JSON.parse(stdout), { duplicate: false, fields: { ok: true } });

  // A CommonJS project (npm init's default, no "type") requires it, as its README shows.
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'cjs-service', version: '1.0.0' }));
  const cjs = `
    const { createClient } = require('@intake/client');
    const intake = createClient({ baseUrl: process.env.URL, orgSlug: process.env.SLUG, apiKey: process.env.KEY });
    intake.identify({ userId: 'commonjs', traits: { cjs: true } })
      .then((r) => intake.getProfile('commonjs').then((p) => console.log(JSON.stringify({ duplicate: r.duplicate, fields: p.fields }))))
      .finally(() => intake.close());`;
  writeFileSync(path.join(dir, 'index.js'), cjs);
  const required = await run(process.execPath, ['index.js'], {
    cwd: dir,
    env: { PATH: process.env.PATH, URL: gateway.url, SLUG: tenant.slug, KEY: tenant.key },
  });
  t.deepEqual(JSON.parse(required.stdout), { duplicate: false, fields: { cjs: true } });
  t.is(required.stderr, '', 'no warning about loading an ES module');
});
