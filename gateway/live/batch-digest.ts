// What the live view keeps of a queued job: for each event it carries, the few fields a page
// shows (environment, messageId, receivedAt, event name, user and anonymous ID), found in the
// job's data where Redis holds it, without reading the events' properties. The gateway writes
// each event as `{"environmentId":…,"messageId":…,"receivedAt":…,"timestampMs":…,"payload":"…"}`
// (handlers/track.ts), and the payload, JSON escaped once more, starts with `type`, `messageId`,
// `event`, `userId`, `anonymousId` and `timestamp` (events/track-payload.ts). So an event's head
// ends where its payload's `properties` begin: HEADS_SCRIPT finds each head in Redis and returns
// it alone, and parseHead() decodes it. A batch job (`{"events":[…]}`) and a dead-letter job
// (`{"event":{…},"error":…}`) hold events of the same form.
import { createHash } from 'node:crypto';

/** One shown field. `whole` is false when the value is cut: `hash` then names the whole value, if it was read. */
export interface HeadField {
  value: string;
  whole: boolean;
  /** SHA-256 (hex) of the whole value, kept instead of a value longer than KEPT_CHARS. */
  hash?: string;
}

export interface EventHead {
  environmentId: string;
  messageId: HeadField;
  receivedAt: number;
  event: HeadField;
  userId: HeadField | null;
  anonymousId: HeadField | null;
}

/** Characters kept of each value (more than a page shows): longer ones are matched by their hash. */
export const KEPT_CHARS = 1024;

/**
 * KEYS[1]: a job's hash. Returns the head of each event of its data, in order: from the event's
 * start to its payload's `properties`, or its first 16 KB when its payload is of another form.
 * A `"` inside a JSON string is always escaped, so none of the three markers can occur inside a
 * value: the first starts an event, the second its payload, the third (escaped once more, after a
 * comma) ends the payload's leading fields. Each marker is searched for from where its last
 * search ended, so a job is scanned once, whatever its events look like.
 */
export const HEADS_SCRIPT = `
local data = redis.call('HGET', KEYS[1], 'data')
if not data then return {} end
local size = #data
local function find(marker, from) return string.find(data, marker, from, true) or (size + 1) end
local START, PAYLOAD, PROPERTIES = '{"environmentId":"', ',"payload":"', ',\\\\"properties\\\\":'
local heads = {}
local payload, properties = 0, 0
local at = find(START, 1)
while at <= size do
  local following = find(START, at + #START)
  if payload < at then payload = find(PAYLOAD, at) end
  local last = math.min(following - 1, at + 16383)
  if payload < following then
    if properties < payload then properties = find(PROPERTIES, payload) end
    if properties < following then last = properties - 1 end
  end
  heads[#heads + 1] = string.sub(data, at, last)
  at = following
end
return heads
`;

/** An event's head as HEADS_SCRIPT returns it, decoded; null when it names no environment or messageId. */
export function parseHead(text: string): EventHead | null {
  const outer = leadingMembers(text);
  const environmentId = outer.get('environmentId');
  const messageId = outer.get('messageId');
  if (typeof environmentId?.value !== 'string' || typeof messageId?.value !== 'string') return null;
  const payload = outer.get('payload');
  const inner = typeof payload?.value === 'string' ? leadingMembers(payload.value) : new Map<string, Member>();
  const receivedAt = outer.get('receivedAt')?.value;
  return {
    environmentId: own(environmentId.value),
    messageId: field(messageId) ?? { value: '', whole: false },
    receivedAt: typeof receivedAt === 'number' ? receivedAt : 0,
    event: field(inner.get('event')) ?? { value: '', whole: false },
    userId: field(inner.get('userId')),
    anonymousId: field(inner.get('anonymousId')),
  };
}

function field(member: Member | undefined): HeadField | null {
  if (typeof member?.value !== 'string') return null;
  const { value, whole } = member;
  if (value.length <= KEPT_CHARS) return { value: own(value), whole };
  const kept = own(value.slice(0, KEPT_CHARS));
  return whole ? { value: kept, whole: false, hash: sha256(value) } : { value: kept, whole: false };
}

/**
 * A copy of its own: V8 may keep a slice (or a cons of slices) as a pointer into the text it came
 * from, and a kept field must not hold a job's head alive. UTF-16 keeps every code unit, a lone
 * surrogate too.
 */
const own = (value: string) => Buffer.from(value, 'utf16le').toString('utf16le');

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest('hex');

/** Whether a field holds exactly `wanted` (a cut field: by the hash of its whole value, when known). */
export function fieldIs(field: HeadField | null, wanted: string): boolean {
  if (!field) return false;
  if (field.whole) return field.value === wanted;
  return field.hash !== undefined && wanted.startsWith(field.value) && sha256(wanted) === field.hash;
}

interface Member {
  value: string | number | boolean | null;
  /** False for a string the text stops inside of. */
  whole: boolean;
}

/**
 * The leading members of a JSON object's text whose values are strings, numbers, booleans or
 * null, up to the first member of another kind or to where the text stops (it may stop
 * anywhere, inside a string too: that string is kept as far as it goes, not whole).
 */
export function leadingMembers(text: string): Map<string, Member> {
  const members = new Map<string, Member>();
  let i = skipSpace(text, 0);
  if (text[i] !== '{') return members;
  i = skipSpace(text, i + 1);
  while (text[i] === '"') {
    const key = readString(text, i + 1);
    if (!key.whole) break;
    i = skipSpace(text, key.end);
    if (text[i] !== ':') break;
    i = skipSpace(text, i + 1);
    const c = text[i];
    if (c === '"') {
      const value = readString(text, i + 1);
      members.set(key.value, { value: value.value, whole: value.whole });
      if (!value.whole) break;
      i = value.end;
    } else {
      const scalar = /^(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)(?=[\s,}])/.exec(text.slice(i, i + 40));
      if (!scalar) break;
      const literal = scalar[0];
      members.set(key.value, { value: literal === 'null' ? null : literal === 'true' ? true : literal === 'false' ? false : Number(literal), whole: true });
      i += literal.length;
    }
    i = skipSpace(text, i);
    if (text[i] !== ',') break;
    i = skipSpace(text, i + 1);
  }
  return members;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
  return i;
}

const SIMPLE_ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/** The JSON string whose text starts at `start` (after its opening quote): its value, and where its text ends. */
export function readString(text: string, start: number): { value: string; whole: boolean; end: number } {
  let value = '';
  let i = start;
  for (;;) {
    // Runs without escapes are copied at once: a long ID costs one slice, not one step per character.
    let run = i;
    while (run < text.length && text[run] !== '"' && text[run] !== '\\') run++;
    value += text.slice(i, run);
    if (run >= text.length) return { value, whole: false, end: text.length };
    if (text[run] === '"') return { value, whole: true, end: run + 1 };
    const e = text[run + 1];
    if (e === undefined) return { value, whole: false, end: text.length };
    if (e === 'u') {
      const hex = text.slice(run + 2, run + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) return { value, whole: false, end: text.length };
      value += String.fromCharCode(parseInt(hex, 16));
      i = run + 6;
    } else {
      const simple = SIMPLE_ESCAPES[e];
      if (simple === undefined) return { value, whole: false, end: text.length };
      value += simple;
      i = run + 2;
    }
  }
}

/** What tells a queued event from another: its messageId, or its hash where the head holds only the start of a long one. A retried enqueue queues it twice. */
export function headIdentity(head: EventHead): string {
  return head.messageId.whole ? `=${head.messageId.value}` : `#${head.messageId.hash ?? head.messageId.value}`;
}
