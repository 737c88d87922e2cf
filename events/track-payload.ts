import { stringifyJson } from '../platform/json-text.ts';

/**
 * The Track event as intake stores it: the accepted fields in a fixed order, with the
 * spec's defaults, serialized once. The gateway measures this string (413) and enqueues
 * it unchanged; unknown top-level fields are not part of it.
 */
export function storedTrackPayload(body: unknown): string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return stringifyJson(body);
  const b = body as Record<string, unknown>;
  return stringifyJson({
    type: b.type,
    messageId: b.messageId,
    event: b.event,
    userId: b.userId ?? null,
    anonymousId: b.anonymousId ?? null,
    timestamp: b.timestamp,
    properties: b.properties === undefined ? {} : b.properties,
    context: b.context === undefined ? {} : b.context,
    integrations: b.integrations === undefined ? {} : b.integrations,
  });
}
