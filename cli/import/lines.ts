// One NDJSON line of an import: what it is (an Identify call, a blank line, or a line that is
// never sent and why) and the messageId it is sent with. Pure.
import { createHash } from 'node:crypto';

export type Line = { kind: 'call'; record: Record<string, unknown> & { userId: string } } | { kind: 'blank' } | { kind: 'invalid'; reason: string };

// Fatal: bytes that are not UTF-8 make the line invalid instead of being replaced by U+FFFD,
// which would send (and store) an identifier or trait the file never held.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A line's bytes (without its newline, a trailing CR dropped) as text, or null when they are not UTF-8. */
export function decodeLine(bytes: Uint8Array): string | null {
  const end = bytes.length > 0 && bytes[bytes.length - 1] === 0x0d ? bytes.length - 1 : bytes.length;
  try {
    return utf8.decode(bytes.subarray(0, end));
  } catch {
    return null;
  }
}

/** The lines of a stream of bytes, split at LF, each still in bytes (a last line without LF included). */
export async function* byteLines(chunks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let rest: Buffer = Buffer.alloc(0);
  for await (const chunk of chunks) {
    const data = rest.length === 0 ? chunk : Buffer.concat([rest, chunk]);
    let start = 0;
    for (let i = data.indexOf(0x0a); i !== -1; i = data.indexOf(0x0a, start)) {
      yield data.subarray(start, i);
      start = i + 1;
    }
    rest = data.subarray(start);
  }
  if (rest.length > 0) yield rest;
}

export function parseLine(text: string | null): Line {
  if (text === null) return { kind: 'invalid', reason: 'not UTF-8' };
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
