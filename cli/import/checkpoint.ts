// The checkpoint of an import, next to its input: which lines are done and what came of them,
// so an interrupted import (Ctrl-C, a crash, SIGKILL) resumes without sending a done line
// again, and sends the others with the messageId and timestamp of the first run.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';

export interface Counts {
  applied: number;
  duplicate: number;
  failed: number;
  invalid: number;
  blank: number;
}

export interface CheckpointData {
  version: 1;
  fileHash: string;
  lines: number;
  /** The timestamp of lines without their own, fixed at the first run: a resent line is the same call. */
  timestamp: string;
  /** Every line number below this (1-based) is done. */
  doneBelow: number;
  /** Done line numbers at or above doneBelow (lines finish out of order). */
  doneAbove: number[];
  counts: Counts;
  /** `<status> <error>` → failed lines. */
  failures: Record<string, number>;
  invalidLines: { line: number; reason: string }[];
  completed: boolean;
}

/** Invalid lines listed in the summary; all of them are in the failed-lines file. */
export const INVALID_LINES_LISTED = 1000;

export function newCheckpoint(fileHash: string, lines: number, timestamp: string): CheckpointData {
  return {
    version: 1,
    fileHash,
    lines,
    timestamp,
    doneBelow: 1,
    doneAbove: [],
    counts: { applied: 0, duplicate: 0, failed: 0, invalid: 0, blank: 0 },
    failures: {},
    invalidLines: [],
    completed: false,
  };
}

/** The done lines of a checkpoint as a watermark and the few finished above it. */
export class DoneLines {
  private below: number;
  private readonly above: Set<number>;
  constructor(data: Pick<CheckpointData, 'doneBelow' | 'doneAbove'>) {
    this.below = data.doneBelow;
    this.above = new Set(data.doneAbove);
  }
  has(line: number): boolean {
    return line < this.below || this.above.has(line);
  }
  add(line: number): void {
    this.above.add(line);
    while (this.above.delete(this.below)) this.below++;
  }
  get size(): number {
    return this.below - 1 + this.above.size;
  }
  snapshot(): Pick<CheckpointData, 'doneBelow' | 'doneAbove'> {
    return { doneBelow: this.below, doneAbove: [...this.above].sort((a, b) => a - b) };
  }
}

export function readCheckpoint(path: string): CheckpointData | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const data = JSON.parse(text) as CheckpointData;
  if (data.version !== 1) throw new Error(`${path}: unknown checkpoint version ${data.version}`);
  return data;
}

/** Written to a temporary file and renamed over the old one: a kill mid-write leaves the previous checkpoint whole. */
export function writeCheckpoint(path: string, data: CheckpointData): void {
  writeFileSync(`${path}.tmp`, JSON.stringify(data));
  renameSync(`${path}.tmp`, path);
}
