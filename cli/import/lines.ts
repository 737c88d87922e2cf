// One NDJSON line of an import: what it is (an Identify call, a blank line, or a line that is
// never sent and why) and the messageId it is sent with. Pure.
import { createHash } from 'node:crypto';

export type Line = { kind: 'call'; record: Record<string, unknown> & { userId: string } } | { kind: 'blank' } | { kind: 'invalid'; reason: string };

export function parseLine(text: string): Line {
  if (text.trim() === '') return { kind: 'blank' };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: 'invalid', reason: 'not JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { kind: 'invalid', reason: 'not a JSON object' };
  const record = value as Record<string, unknown>;
  if (typeof record.userId !== 'string' || record.userId.trim() === '') return { kind: 'invalid', reason: 'no userId' };
  return { kind: 'call', record: record as Record<string, unknown> & { userId: string } };
}

/**
 * The messageId of a line without its own: the same for the same file, line number and text on
 * every run, so a line sent again after an interruption is recognized by the service as a retry
 * (`duplicate: true`) and never applied twice.
 */
export function lineMessageId(fileHash: string, lineNumber: number, text: string): string {
  const digest = createHash('sha256').update(`${fileHash}\n${lineNumber}\n`).update(text).digest('hex');
  return `import-${digest.slice(0, 40)}`;
}
