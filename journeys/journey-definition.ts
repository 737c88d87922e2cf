// The journey document of product.md ("Journeys"), checked field by field so that an operator
// sees every bad field by its path (`steps[1].send.channel: ...`). Pure.
import { RESERVED_EVENT_NAMES } from '../events/track.ts';

export type Step =
  { waitUntil: { event: string; timeoutMs: number | null } } | { delay: { ms: number } } | { send: { channel: SendChannel; template: string } };

export type SendChannel = 'email' | 'sms';

export type Entry = { event: string } | { attributeChanged: string };

export interface JourneyDefinition {
  name: string;
  entry: Entry;
  steps: Step[];
  exitOn: string[];
  goal: { event: string; windowMs: number } | null;
  reentry: boolean;
}

export type Parsed = { ok: true; value: JourneyDefinition } | { ok: false; errors: string[] };

const TOP_LEVEL = ['name', 'entry', 'steps', 'exitOn', 'goal', 'reentry'];
const STEP_KINDS = ['waitUntil', 'delay', 'send'];
const MAX_NAME = 255;
// A timer further out than this is a typo (and would overflow setTimeout-style arithmetic elsewhere).
const MAX_MS = 10 * 365 * 86_400_000;

export function parseJourneyDefinition(input: unknown): Parsed {
  const errors: string[] = [];
  const fail = (path: string, message: string) => void errors.push(`${path}: ${message}`);

  if (!isObject(input)) return { ok: false, errors: ['journey: must be a JSON object'] };
  for (const key of Object.keys(input)) if (!TOP_LEVEL.includes(key)) fail(key, 'unknown field');

  // Event and trait names have no length limit: Track accepts any, and they must match exactly.
  const name = text(input.name, 'name', fail, MAX_NAME);
  const entry = parseEntry(input.entry, fail);

  const steps: Step[] = [];
  if (!Array.isArray(input.steps)) fail('steps', 'must be an array');
  else
    input.steps.forEach((raw, i) => {
      const step = parseStep(raw, `steps[${i}]`, fail);
      if (step) steps.push(step);
    });

  const exitOn: string[] = [];
  if (input.exitOn !== undefined && input.exitOn !== null) {
    if (!Array.isArray(input.exitOn)) fail('exitOn', 'must be an array of event names');
    else
      input.exitOn.forEach((raw, i) => {
        const event = eventName(raw, `exitOn[${i}]`, fail);
        if (event !== null) exitOn.push(event);
      });
  }

  let goal: JourneyDefinition['goal'] = null;
  if (input.goal !== undefined && input.goal !== null) {
    if (!isObject(input.goal)) fail('goal', 'must be an object with event and windowMs');
    else {
      only(input.goal, ['event', 'windowMs'], 'goal', fail);
      const event = eventName(input.goal.event, 'goal.event', fail);
      const windowMs = duration(input.goal.windowMs, 'goal.windowMs', fail);
      if (event !== null && windowMs !== null) goal = { event, windowMs };
    }
  }

  let reentry = false;
  if (input.reentry !== undefined && input.reentry !== null) {
    if (typeof input.reentry !== 'boolean') fail('reentry', 'must be true or false');
    else reentry = input.reentry;
  }

  if (errors.length || name === null || entry === null) return { ok: false, errors };
  return { ok: true, value: { name, entry, steps, exitOn: [...new Set(exitOn)], goal, reentry } };
}

function parseEntry(raw: unknown, fail: (path: string, message: string) => void): Entry | null {
  if (!isObject(raw)) {
    fail('entry', 'must be an object: { "event": NAME } or { "attributeChanged": TRAIT }');
    return null;
  }
  const keys = Object.keys(raw);
  if (keys.length !== 1 || (keys[0] !== 'event' && keys[0] !== 'attributeChanged')) {
    fail('entry', 'must have exactly one of "event" or "attributeChanged"');
    return null;
  }
  if (keys[0] === 'event') {
    const event = eventName(raw.event, 'entry.event', fail);
    return event === null ? null : { event };
  }
  const trait = text(raw.attributeChanged, 'entry.attributeChanged', fail);
  return trait === null ? null : { attributeChanged: trait };
}

function parseStep(raw: unknown, path: string, fail: (path: string, message: string) => void): Step | null {
  if (!isObject(raw) || Object.keys(raw).length !== 1 || !STEP_KINDS.includes(Object.keys(raw)[0])) {
    fail(path, 'must be an object with exactly one of "waitUntil", "delay" or "send"');
    return null;
  }
  const [kind] = Object.keys(raw);
  const body = raw[kind];
  if (!isObject(body)) {
    fail(`${path}.${kind}`, 'must be an object');
    return null;
  }
  switch (kind) {
    case 'waitUntil': {
      only(body, ['event', 'timeoutMs'], `${path}.waitUntil`, fail);
      const event = eventName(body.event, `${path}.waitUntil.event`, fail);
      // Without a timeout the wait lasts until the event comes (or the person exits).
      const timeoutMs = body.timeoutMs === undefined || body.timeoutMs === null ? null : duration(body.timeoutMs, `${path}.waitUntil.timeoutMs`, fail);
      if (event === null || (timeoutMs === null && body.timeoutMs !== undefined && body.timeoutMs !== null)) return null;
      return { waitUntil: { event, timeoutMs } };
    }
    case 'delay': {
      only(body, ['ms'], `${path}.delay`, fail);
      const ms = duration(body.ms, `${path}.delay.ms`, fail);
      return ms === null ? null : { delay: { ms } };
    }
    default: {
      only(body, ['channel', 'template'], `${path}.send`, fail);
      const channel = body.channel;
      if (channel !== 'email' && channel !== 'sms') fail(`${path}.send.channel`, 'must be "email" or "sms"');
      const template = text(body.template, `${path}.send.template`, fail);
      return (channel === 'email' || channel === 'sms') && template !== null ? { send: { channel, template } } : null;
    }
  }
}

function only(obj: Record<string, unknown>, allowed: string[], path: string, fail: (path: string, message: string) => void) {
  for (const key of Object.keys(obj)) if (!allowed.includes(key)) fail(`${path}.${key}`, 'unknown field');
}

function text(raw: unknown, path: string, fail: (path: string, message: string) => void, max = Infinity): string | null {
  if (typeof raw !== 'string' || raw.trim() === '') {
    fail(path, 'must be a non-empty string');
    return null;
  }
  if (raw.length > max) {
    fail(path, `must be at most ${max} characters`);
    return null;
  }
  return raw;
}

/** Event names match exactly (no trimming), as Track's `event` is matched. */
function eventName(raw: unknown, path: string, fail: (path: string, message: string) => void): string | null {
  const name = text(raw, path, fail);
  if (name !== null && RESERVED_EVENT_NAMES.has(name)) {
    fail(path, `${name} is reserved for the service's own events (use entry.attributeChanged for profile changes)`);
    return null;
  }
  return name;
}

function duration(raw: unknown, path: string, fail: (path: string, message: string) => void): number | null {
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0 || raw > MAX_MS) {
    fail(path, `must be a whole number of milliseconds from 0 to ${MAX_MS}`);
    return null;
  }
  return raw;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Every event name a journey reacts to: its entry, its waits, its exits and its goal. */
export function eventNamesOf(def: JourneyDefinition): string[] {
  const names = new Set<string>();
  if ('event' in def.entry) names.add(def.entry.event);
  for (const step of def.steps) if ('waitUntil' in step) names.add(step.waitUntil.event);
  for (const name of def.exitOn) names.add(name);
  if (def.goal) names.add(def.goal.event);
  return [...names];
}
