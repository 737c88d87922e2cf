// A json-pool.ts thread run from the TypeScript sources: tsx first (as bin/intake.js does; a
// thread does not inherit the main thread's loader), then the task loop. The compiled build
// starts json-pool-loop.js directly and needs neither this file nor tsx.
import { register } from 'tsx/esm/api';

register();
await import('./json-pool-loop.ts');
