// Every reply the HTTP tests receive from the three endpoints is checked against
// docs/openapi.yaml (test/helpers/http.ts and test/fuzz/client.ts call `conform`). A reply
// that does not match fails the request at once; because a test may swallow that error (a
// retry loop, a fault test counting dropped connections), each test file also ends with a
// hook that fails when any reply of the file did not match.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { isEndpointPath, loadApiChecker, type ApiChecker, type ObservedReply } from './openapi.ts';

// Loaded and compiled when a test file imports the HTTP helpers, before any test runs: doing
// it at the first reply would block the event loop of a test process (and of the gateway it
// runs in-process) in the middle of a test.
const started = performance.now();
const checker: ApiChecker = loadApiChecker();
checker.compileAll();
const loadMs = performance.now() - started;
const drift: string[] = [];
/** `POST /api/track/{org_slug} 202` → replies seen. */
const seen = new Map<string, number>();

export class ApiDriftError extends Error {}

export function conform(reply: ObservedReply): void {
  if (!isEndpointPath(reply.path)) return;
  const verdict = checker.check(reply);
  if (!verdict) return;
  const key = `${verdict.operation} ${verdict.status}`;
  seen.set(key, (seen.get(key) ?? 0) + 1);
  if (!verdict.problems.length) return;
  const message = `reply does not match docs/openapi.yaml: ${reply.method} ${reply.path.slice(0, 120)} → ${reply.status}: ${verdict.problems.join('; ')}`;
  if (drift.length < 20) drift.push(message);
  throw new ApiDriftError(message);
}

test.after.always('every reply of this file matched docs/openapi.yaml', (t) => {
  // OPENAPI_SEEN_DIR=<dir>: each test process writes the statuses it saw per operation there.
  const dir = process.env.OPENAPI_SEEN_DIR;
  if (dir && seen.size) writeFileSync(path.join(dir, `${process.pid}.json`), JSON.stringify({ loadMs: Math.round(loadMs), seen: Object.fromEntries(seen) }));
  t.deepEqual(drift, []);
});
