// postinstall: generate the Prisma client offline. `prisma generate` needs no schema
// engine, but the CLI insists on finding one; any executable satisfies it.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const env = { ...process.env };
if (!env.PRISMA_SCHEMA_ENGINE_BINARY) env.PRISMA_SCHEMA_ENGINE_BINARY = existsSync('/bin/false') ? '/bin/false' : process.execPath;
env.PRISMA_HIDE_UPDATE_MESSAGE = '1';
execFileSync(process.execPath, ['node_modules/prisma/build/index.js', 'generate'], { stdio: 'inherit', env });
