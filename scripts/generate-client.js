// postinstall: generate the Prisma client offline. `prisma generate` needs no schema
// engine, but the CLI insists on finding one; any executable satisfies it.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

// The prisma CLI is a dev dependency: a production install (--omit=dev) runs a build made
// elsewhere, whose compiled client is inside dist/.
if (!existsSync('node_modules/prisma/build/index.js')) {
  console.log('intake: prisma is not installed (a production install): the client is not generated');
  process.exit(0);
}
const env = { ...process.env };
if (!env.PRISMA_SCHEMA_ENGINE_BINARY) env.PRISMA_SCHEMA_ENGINE_BINARY = existsSync('/bin/false') ? '/bin/false' : process.execPath;
env.PRISMA_HIDE_UPDATE_MESSAGE = '1';
execFileSync(process.execPath, ['node_modules/prisma/build/index.js', 'generate'], { stdio: 'inherit', env });
