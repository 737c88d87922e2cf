// A json-pool.ts thread: TypeScript through tsx (as bin/intake.js does; a thread does not
// inherit the main thread's loader), then the task loop.
import { register } from 'tsx/esm/api';

register();
await import('./json-pool-loop.ts');
