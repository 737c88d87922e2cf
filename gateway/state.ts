import type { BoundEnvironment } from '../environments/environment-store.ts';
import type { IdentifyInput } from '../identify/validation.ts';
import type { TrackHeader } from '../events/track.ts';

/** Per-request state; each middleware of the check chain fills one field, in order. */
export interface IngestState {
  requestId: string;
  receivedAt: number;
  pathValue: string; // check 2
  environmentKey: string; // check 3 (`prod` when the header is absent)
  apiKeyHash: string; // check 4
  environment: BoundEnvironment; // check 5
  rawBody: string; // check 6a: the body as text, parsed by check 6b
  storedPayload: string; // check 6b (Track): the event as it will be stored
  track: TrackHeader; // check 6b
  timestampMs: number;
  identify: IdentifyInput; // check 6b (Identify)
  /** The in-flight slot it holds until its checks and answer have ended: admission.ts's own record, opaque here. */
  inFlight?: object;
  /** What refused the request (a 4xx's error, with an Identify call's first issue), for the request log. */
  refusal?: string;
}

/** The matched route's name from the route table (@koa/router records it on the context). */
export function routeName(ctx: object): string | null {
  return (ctx as { _matchedRouteName?: string })._matchedRouteName ?? null;
}
