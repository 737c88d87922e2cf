// Turns a reply into a thrown Error (what fast-check shrinks on) when it breaks the spec.
import { isDeepStrictEqual } from 'node:util';
import type { RawReply } from './client.ts';
import { errorShapeProblem, type Endpoint } from './spec-errors.ts';
import { matches, type IdentifyExpectation } from './spec-identify.ts';
import type { Expectation } from './spec-track.ts';

export class Mismatch extends Error {}

const show = (reply: RawReply) => `${reply.status} ${reply.text.slice(0, 300)}`;

/** Never a 5xx, and any non-2xx is one of the spec's error shapes. */
export function expectSpecShape(endpoint: Endpoint, reply: RawReply): void {
  if (reply.status >= 200 && reply.status < 300) return;
  const problem = errorShapeProblem(endpoint, reply);
  if (problem) throw new Mismatch(`${endpoint}: ${problem}`);
}

export function expectPlainNotFound(reply: RawReply): void {
  if (reply.status !== 404 || reply.text !== '404 Not Found') throw new Mismatch(`expected the plain-text 404, got ${show(reply)}`);
}

/** One of `allowed` (Track's or any endpoint's exact answers); `accepted` checks the success body. */
export function expectOneOf(endpoint: Endpoint, reply: RawReply, allowed: Expectation[], accepted: (reply: RawReply) => string | null): void {
  expectSpecShape(endpoint, reply);
  const why: string[] = [];
  for (const e of allowed) {
    if (e.kind === 'unknown') return;
    if (e.kind === 'accepted') {
      if (reply.status >= 200 && reply.status < 300) {
        const problem = accepted(reply);
        if (!problem) return;
        why.push(problem);
      } else why.push('expected success');
    } else if (reply.status === e.status && isDeepStrictEqual(reply.json, e.body)) return;
    else why.push(`expected ${e.status} ${JSON.stringify(e.body)}`);
  }
  throw new Mismatch(`${endpoint}: got ${show(reply)}; ${why.join(' or ')}`);
}

/** Identify's answer for a body the model judged (`seen`: the messageId was accepted before). */
export function expectIdentify(reply: RawReply, expected: IdentifyExpectation, messageId: string | undefined, seen: boolean): void {
  expectSpecShape('identify', reply);
  const fail = (what: string) => {
    throw new Mismatch(`identify: got ${show(reply)}; expected ${what}`);
  };
  const body = reply.json as Record<string, unknown> | undefined;
  switch (expected.kind) {
    case 'unknown':
      return;
    case 'tooFarAhead':
      if (reply.status !== 400 || !isDeepStrictEqual(body, { error: 'timestamp cannot be more than 5 minutes in the future' }))
        fail('the future-timestamp 400');
      return;
    case 'invalid': {
      if (reply.status !== 400 || body?.error !== 'Invalid Identify call') fail(`400 Invalid Identify call with ${JSON.stringify(expected.mustInclude)}`);
      const issues = body!.issues as { path: unknown[]; message: string }[];
      for (const m of expected.mustInclude) if (!issues.some((i) => matches(i, m))) fail(`an issue ${JSON.stringify(m)}`);
      return;
    }
    case 'accepted': {
      if (seen && (reply.status === 409 || (reply.status === 200 && body?.duplicate === true))) return;
      if (reply.status !== 200) fail('200');
      const keys = Object.keys(body ?? {})
        .sort()
        .join(',');
      if (keys !== 'duplicate,messageId,success' || body!.success !== true || body!.duplicate !== false) fail('{success: true, messageId, duplicate: false}');
      const id = body!.messageId;
      const echoed =
        messageId === undefined
          ? typeof id === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)
          : id === messageId || id === messageId.trim();
      if (!echoed) fail(`messageId ${messageId === undefined ? 'a generated UUID' : JSON.stringify(messageId)}`);
    }
  }
}
