import Router from '@koa/router';
import type { Config } from '../platform/config.ts';
import type { Db } from '../platform/db.ts';
import type { Redis } from '../platform/redis.ts';
import type { RedisMemory } from '../platform/redis-memory.ts';
import type { AuthCache } from './auth-cache.ts';
import type { Suppressions } from './suppressions.ts';
import type { EventBatcher } from './event-batcher.ts';
import type { ProfileReader } from '../profiles/profile-reader.ts';
import type { JsonWork } from '../platform/json-pool.ts';
import { notJsonIssues } from '../identify/validation.ts';
import { bodyTooLarge, identifyInvalid, invalidJson, trackTooLarge } from './errors.ts';
import { healthz, metrics, readyz } from './handlers/health.ts';
import { identify, type IdentifyBatcher } from './handlers/identify.ts';
import { profiles } from './handlers/profiles.ts';
import { track } from './handlers/track.ts';
import { callerChecks } from './checks/caller.ts';
import { checkChain, type Step } from './checks/chain.ts';
import { jsonBody } from './checks/json-body.ts';
import { suppressedIdentify, suppressedTrack } from './checks/suppressed.ts';
import { validateIdentify, validateTrack } from './checks/validate.ts';
import { getOnly } from './middleware/not-found.ts';
import type { IngestState } from './state.ts';
import type { MetricsSource } from './cluster/member.ts';
import type { Admission } from './admission.ts';
import type { UploadWatch } from './upload-watch.ts';

export interface GatewayDeps {
  config: Config;
  db: Db;
  redis: Redis;
  /** Redis's memory: /readyz says not ready, with the reason, while it is full. */
  memory: RedisMemory;
  batcher: EventBatcher;
  identifyBatcher: IdentifyBatcher;
  profileReader: ProfileReader;
  authCache: AuthCache;
  /** Suppressed user IDs: their calls are answered and stored nowhere (suppressions.ts). */
  suppressions: Suppressions;
  /** This process's registry, or (several gateway processes) every process's metrics added up. */
  metrics: MetricsSource;
  /** Upload and in-flight slots per environment and in total (admission.ts). */
  admission: Admission;
  /** Cuts uploads that arrive too slowly (upload-watch.ts). */
  uploadWatch: UploadWatch;
  /** Where JSON work of a large body runs: off the event loop (platform/json-pool.ts). */
  json: JsonWork;
}

/**
 * The route table: one named line per endpoint (the name is the log's and the metrics' `route`), its checks in
 * product.md's order, each a step of one chain (checks/chain.ts). Slots are taken once the environment is known
 * (after check 5): a body that is still arriving takes an upload slot while it is read (inside jsonBody), and a
 * request holds an in-flight slot from when its body is read until it is answered. Health probes and /metrics
 * take neither.
 */
export function createRouter(deps: GatewayDeps): Router<IngestState> {
  const { config, admission } = deps;
  // strict: no trailing slash; sensitive: paths match exactly.
  const router = new Router<IngestState>({ strict: true, sensitive: true });
  const ingest = callerChecks(deps.authCache);
  const inFlight = admission.takeInFlight;
  const chain = (steps: Step[]) => checkChain(steps, admission.leaveInFlight);
  const uploads = { admission, watch: deps.uploadWatch };
  // Size before parsing (product.md's check order): TRACK_RAW_BODY_LIMIT is at most the 1 MiB event
  // limit, so a raw body over it answers 413 whatever it holds, even when it is not JSON.
  const trackBody = jsonBody(config.trackRawBodyLimit, { tooLarge: trackTooLarge, notJson: invalidJson }, uploads);
  const identifyBody = jsonBody(config.identifyBodyLimit, { tooLarge: bodyTooLarge, notJson: () => identifyInvalid(notJsonIssues()) }, uploads);

  router.post(
    'track',
    '/api/track/:orgSlug',
    chain([...ingest, trackBody, inFlight, validateTrack(deps.json), suppressedTrack(deps.suppressions), track(deps)]),
  );
  router.post(
    'identify',
    '/api/identify/:orgSlug',
    chain([...ingest, identifyBody, inFlight, validateIdentify(deps.json), suppressedIdentify(deps.suppressions), identify(deps)]),
  );
  router.get('profiles', '/api/profiles/:orgSlug/:userId', chain([getOnly, ...ingest, inFlight, profiles(deps)]));
  router.get('healthz', '/healthz', healthz);
  router.get('readyz', '/readyz', readyz(deps));
  router.get('metrics', '/metrics', metrics(deps.metrics));
  return router;
}
