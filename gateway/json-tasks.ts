// The JSON work whose cost grows with a body's size and shape (parse, validate, measure,
// serialize, merge, compare), as pure functions of strings: platform/json-pool.ts runs them on
// the caller's thread for small input and on a worker thread for large input, so a 4 MB body
// nested 2,000,000 levels deep or 500,000 keys wide never holds up the gateway's event loop.
// Inputs and results are strings and small flat objects, cheap to copy between threads; a
// parsed body never leaves the thread that parsed it. This table is what a pool thread imports
// to find a task by its key; callers pass the function itself.
import type { JsonTaskTable } from '../platform/json-pool.ts';
import { decodeTrack } from '../events/track.ts';
import { planIdentifyBatch } from '../identify/identify-plan.ts';
import { decodeIdentify } from '../identify/validation.ts';

export const JSON_TASKS: JsonTaskTable = {
  url: import.meta.url,
  tasks: { decodeTrack, decodeIdentify, planIdentifyBatch },
  // Runs inside an Identify transaction, holding its profiles' row locks.
  urgent: [planIdentifyBatch],
};
