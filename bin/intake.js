#!/usr/bin/env node
// The `intake` command. TypeScript runs directly through tsx's loader, so `npx intake`
// works right after `npm ci` with no build step to remember.
import { register } from 'tsx/esm/api';

register();
await import('../cli/intake.ts');
