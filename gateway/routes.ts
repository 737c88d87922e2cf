import Router from '@koa/router';
import type { Config } from '../common/config.ts';
import type { Db } from '../common/db.ts';
import type { Middleware } from 'koa';
import type { Redis } from '../common/redis.ts';
import type { AuthCache } from './auth-cache.ts';
import type { EventBatcher } from './event-batcher.ts';
import type { IdentifyBatcher } from './identify-batcher.ts';
import type { ProfileReader } from './profile-reader.ts';
import type { JsonWork } from '../common/json-pool.ts';
import { notJsonIssues } from '../common/validation/identify.ts';
import { bodyTooLarge, identifyInvalid, invalidJson, trackTooLarge } from './errors.ts';
import { healthz, metrics, readyz } from './handlers/health.ts';
import { identify } from './handlers/identify.ts';
import { profiles } from './handlers/profiles.ts';
import { track } from './handlers/track.ts';
import { apiKey } from './middleware/api-key.ts';
import { environmentBinding } from './middleware/environment-binding.ts';
import { environmentHeader } from './middleware/environment-header.ts';
import { jsonBody } from './middleware/json-body.ts';
import { getOnly } from './middleware/not-found.ts';
import { orgSlug } from './middleware/org-slug.ts';
import { validateIdentify, validateTrack } from './middleware/validate.ts';
import type { IngestState } from './state.ts';
import type { MetricsSource } from './cluster/member.ts';

export interface GatewayDeps {
  config: Config;
  db: Db;
  redis: Redis;
  batcher: EventBatcher;
  identifyBatcher: IdentifyBatcher;
  profileReader: ProfileReader;
  authCache: AuthCache;
  /** This process's registry, or (several gateway processes) every process's metrics added up. */
  metrics: MetricsSource;
  /** The in-flight bound (middleware/overload.ts), first in each API route's chain. */
  overload: Middleware<IngestState>;
  /** Where JSON work of a large body runs: off the event loop (common/json-pool.ts). */
  json: JsonWork;
}

/**
 * The route table: one named line per endpoint (the name is the log's and the metrics' `route`), its checks in
 * product.md's order. The overload bound comes right after the route matched; health probes and /metrics skip it.
 */
export function createRouter(deps: GatewayDeps): Router<IngestState> {
  const { config } = deps;
  // strict: no trailing slash; sensitive: paths match exactly.
  const router = new Router<IngestState>({ strict: true, sensitive: true });
  const ingest = [deps.overload, orgSlug, environmentHeader, apiKey(deps.authCache), environmentBinding];
  // Size before parsing (product.md's check order): TRACK_RAW_BODY_LIMIT is at most the 1 MiB event
  // limit, so a raw body over it answers 413 whatever it holds, even when it is not JSON.
  const trackBody = jsonBody(config.trackRawBodyLimit, { tooLarge: trackTooLarge, notJson: invalidJson });
  const identifyBody = jsonBody(config.identifyBodyLimit, { tooLarge: bodyTooLarge, notJson: () => identifyInvalid(notJsonIssues()) });

  router.post('track', '/api/track/:orgSlug', ...ingest, trackBody, validateTrack(deps.json), track(deps));
  router.post('identify', '/api/identify/:orgSlug', ...ingest, identifyBody, validateIdentify(deps.json), identify(deps));
  router.get('profiles', '/api/profiles/:orgSlug/:userId', getOnly, ...ingest, profiles(deps));
  router.get('healthz', '/healthz', healthz);
  router.get('readyz', '/readyz', readyz(deps));
  router.get('metrics', '/metrics', metrics(deps.metrics));
  return router;
}
