// An import: one Identify call per NDJSON line through the public API, `concurrency` at a time,
// with a checkpoint next to the input, the failed lines written beside it, and a summary.
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync, statSync, writeFileSync, appendFileSync } from 'node:fs';
import path from 'node:path';
import { IntakeApiError, type IdentifyInput, type IntakeClient } from '../../clients/typescript/src/index.ts';
import { DoneLines, INVALID_LINES_LISTED, newCheckpoint, readCheckpoint, writeCheckpoint, type CheckpointData, type Counts } from './checkpoint.ts';
import { byteLines, decodeLine, lineMessageId, parseLine } from './lines.ts';
import { startProgress, type ProgressOutput } from './progress.ts';

export class ImportStopped extends Error {}

export interface ImportOptions {
  file: string;
  client: Pick<IntakeClient, 'identify'>;
  concurrency: number;
  progress: ProgressOutput;
  /** Plain progress lines (not a terminal) every this many ms. */
  progressIntervalMs?: number;
  /** Aborted: stop sending, let the calls in flight finish, save the checkpoint. */
  signal?: AbortSignal;
  /** Retries the client made, read for the summary. */
  retries?: () => number;
}

export interface ImportSummary extends Counts {
  file: string;
  /** Lines of the file: applied + duplicate + failed + invalid + blank. */
  lines: number;
  failures: Record<string, number>;
  invalidLines: { line: number; reason: string }[];
  failedFile: string | null;
  checkpoint: string;
  /** This run continued an interrupted import. */
  resumed: boolean;
  /** Identify calls this run made (retries not counted), and the retries. */
  sent: number;
  retries: number;
  seconds: number;
}

export const checkpointPath = (file: string) => `${file}.checkpoint.json`;
export const failedPath = (file: string) => `${file}.failed.ndjson`;

export async function runImport(options: ImportOptions): Promise<ImportSummary> {
  const file = path.resolve(options.file);
  const started = Date.now();
  const { hash, lines } = await fingerprint(file);
  const ckptFile = checkpointPath(file);
  const previous = readCheckpoint(ckptFile);
  if (previous && previous.fileHash !== hash) {
    throw new ImportStopped(`${file} changed since the import recorded in ${ckptFile} began; delete that checkpoint to import the file from the start`);
  }
  // Lines without a timestamp get the file's modification time (when the export was written),
  // so live updates newer than the export keep their values; fixed at the first run.
  const checkpoint = previous ?? newCheckpoint(hash, lines, new Date(Math.min(statSync(file).mtimeMs, Date.now())).toISOString());
  const failed = failedPath(file);
  const summary = (sent: number): ImportSummary => ({
    file,
    lines: checkpoint.lines,
    ...checkpoint.counts,
    failures: checkpoint.failures,
    invalidLines: checkpoint.invalidLines,
    failedFile: checkpoint.counts.failed + checkpoint.counts.invalid > 0 ? failed : null,
    checkpoint: ckptFile,
    resumed: previous !== null,
    sent,
    retries: options.retries?.() ?? 0,
    seconds: Math.round((Date.now() - started) / 100) / 10,
  });
  if (checkpoint.completed) return summary(0);

  const done = new DoneLines(checkpoint);
  keepFailedOf(failed, done, previous !== null);
  const doneAtStart = done.size;
  const progressStarted = Date.now();
  const progress = startProgress(
    options.progress,
    () => ({ done: done.size, total: lines, doneAtStart, elapsedMs: Date.now() - progressStarted }),
    options.progressIntervalMs ?? 2000,
  );
  const save = () => writeCheckpoint(ckptFile, { ...checkpoint, ...done.snapshot() });
  const saver = setInterval(save, 250);
  let sent = 0;
  let stop: Error | undefined;
  const onAbort = () => (stop ??= new ImportStopped('interrupted'));
  options.signal?.addEventListener('abort', onAbort);

  const record = (line: number, entry: Record<string, unknown>) => appendFileSync(failed, JSON.stringify({ line, ...entry }) + '\n');
  const send = async (line: number, text: string, input: IdentifyInput) => {
    try {
      const result = await options.client.identify(input);
      checkpoint.counts[result.duplicate ? 'duplicate' : 'applied']++;
    } catch (err) {
      // A temporary failure that outlasted the client's retries (the service is down), or an
      // answer about the import rather than the line (key, environment, URL): the line stays
      // undone, and the import stops so that it can be resumed once that is fixed.
      if (!(err instanceof IntakeApiError) || err.temporary || concernsEveryLine(err)) {
        stop ??= err as Error;
        return;
      }
      const reason = `${err.status} ${err.error}`;
      checkpoint.counts.failed++;
      checkpoint.failures[reason] = (checkpoint.failures[reason] ?? 0) + 1;
      record(line, { status: err.status, error: err.error, ...(err.issues ? { issues: err.issues } : {}), text });
    }
    done.add(line);
  };

  const inFlight = new Set<Promise<void>>();
  try {
    let lineNumber = 0;
    for await (const bytes of byteLines(createReadStream(file))) {
      lineNumber++;
      if (stop) break;
      if (done.has(lineNumber)) continue;
      const decoded = decodeLine(bytes);
      const parsed = parseLine(decoded);
      if (parsed.kind === 'blank') {
        checkpoint.counts.blank++;
        done.add(lineNumber);
        continue;
      }
      if (parsed.kind === 'invalid') {
        checkpoint.counts.invalid++;
        if (checkpoint.invalidLines.length < INVALID_LINES_LISTED) checkpoint.invalidLines.push({ line: lineNumber, reason: parsed.reason });
        // A line that is not UTF-8 has no text to show: its bytes go to the failed-lines file as base64.
        record(lineNumber, decoded === null ? { error: parsed.reason, base64: bytes.toString('base64') } : { error: parsed.reason, text: decoded });
        done.add(lineNumber);
        continue;
      }
      const text = decoded as string;
      const own = parsed.record.messageId;
      const input = {
        ...parsed.record,
        messageId: typeof own === 'string' && own.trim() !== '' ? own : lineMessageId(hash, lineNumber, text),
        timestamp: parsed.record.timestamp ?? checkpoint.timestamp,
      } as IdentifyInput;
      while (inFlight.size >= options.concurrency) await Promise.race(inFlight);
      if (stop) break;
      sent++;
      const task = send(lineNumber, text, input).finally(() => inFlight.delete(task));
      inFlight.add(task);
    }
    await Promise.all(inFlight);
  } finally {
    clearInterval(saver);
    options.signal?.removeEventListener('abort', onAbort);
    progress.stop();
  }
  if (stop) {
    save();
    throw new ImportStopped(
      `import stopped (${stop.message}): ${done.size} of ${lines} lines done, checkpoint ${ckptFile}; run the same command again to resume`,
    );
  }
  checkpoint.completed = true;
  save();
  return summary(sent);
}

/** SHA-256 of the file and its line count (as readline splits it), in one streaming pass. */
async function fingerprint(file: string): Promise<{ hash: string; lines: number }> {
  const hash = createHash('sha256');
  let newlines = 0;
  let last = 0x0a;
  let size = 0;
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    size += chunk.length;
    for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) newlines++;
    last = chunk[chunk.length - 1];
  }
  return { hash: hash.digest('hex'), lines: size === 0 ? 0 : newlines + (last === 0x0a ? 0 : 1) };
}

/**
 * The failed-lines file holds exactly the failed lines the checkpoint counts as done: on a
 * resume, entries written after the last checkpoint are dropped (those lines are sent again);
 * a fresh import starts it empty.
 */
function keepFailedOf(failed: string, done: DoneLines, resumed: boolean): void {
  if (!existsSync(failed)) return;
  if (!resumed) return writeFileSync(failed, '');
  const kept = readFileSync(failed, 'utf8')
    .split('\n')
    .filter((l) => l !== '' && done.has(entryLine(l)));
  writeFileSync(failed, kept.map((l) => l + '\n').join(''));
}

/** The line number of a failed-lines entry; 0 (never done) for one a kill cut short. */
function entryLine(entry: string): number {
  try {
    return (JSON.parse(entry) as { line: number }).line;
  } catch {
    return 0;
  }
}

/** Errors no line can cause and every line would get: a bad key or environment, a wrong URL. */
function concernsEveryLine(err: IntakeApiError): boolean {
  if (err.status === 401 || err.status === 403) return true;
  if (err.status === 404) return err.error !== 'Profile not found';
  return err.status === 400 && (err.error === 'Invalid org slug' || err.error === 'Invalid environment');
}
