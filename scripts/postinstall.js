// postinstall: generate the Prisma client, then compile dist/ (emit only).
//
// Not under `npx intake` / `npm exec intake` (npm_command is then 'exec'): run in a folder whose
// package.json has the `intake` bin, npm exec installs that folder into its cache as a link and
// runs this script in the folder itself, a checkout that `npm ci` has already set up. Running it
// there would delete and rewrite platform/generated/prisma and dist/ under a service started from
// them (`npm start` in another shell), so a process starting meanwhile fails with ENOENT.
import { spawnSync } from 'node:child_process';

if (process.env.npm_command === 'exec') {
  console.error('intake: npm exec only links this folder: no client generation or build (npm ci does them)');
  process.exit(0);
}
for (const args of [['scripts/generate-client.js'], ['scripts/build.mjs', '--no-check', '--after-install']]) {
  const { status, error } = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (error) throw error;
  if (status !== 0) process.exit(status ?? 1);
}
