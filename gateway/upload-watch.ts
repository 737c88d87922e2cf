// The bodies being read right now that had not arrived when the checks before them finished,
// checked on one interval for being too slow (gateway/upload-pace.ts). Nearly every body
// is one for a moment (Node's parser hands the headers over before the body, even from one
// packet), so registering costs next to nothing: one timer for the gateway rather than one per
// request, an array with swap-remove rather than a Set (a fresh object's add and delete cost
// ~0.7 µs here: an identity hash and a table that shrinks), and no clock read per request. A
// body's reading counts from the first check that sees it, which is at most one interval after
// it began: a body is never cut before its allowance, and at most two intervals after it.
import { uploadOverdue, type UploadPace } from './upload-pace.ts';

/** One body being read. */
export interface Upload {
  /** When the first check saw it (NaN until then). */
  seenAt: number;
  /** Bytes received so far; the reader keeps it current. */
  received: number;
  /** Stops reading and fails the read as too slow. Called at most once: by a check, or when its upload slot is taken back (checks/json-body.ts), which unwatches it first. */
  readonly cut: () => void;
  /** Its place in the watch's array; -1 once unwatched. */
  index: number;
}

export interface UploadWatch {
  /** Starts watching a body; `cut` is called if it becomes overdue before unwatch. */
  watch(cut: () => void): Upload;
  /** Stops watching (again is harmless). */
  unwatch(upload: Upload): void;
  /** Bodies being watched now. */
  active(): number;
  /** Bodies cut since start. */
  cuts(): number;
  close(): void;
}

/** How often the uploads are checked: 250 ms, or a quarter of the grace when that is shorter. */
export function sweepIntervalMs(pace: UploadPace): number {
  return Math.max(10, Math.min(250, Math.floor(pace.graceMs / 4)));
}

/** `onSweep` runs after each check (the admission's pruning rides on the same timer). */
export function createUploadWatch(pace: UploadPace, onSweep: () => void = () => {}): UploadWatch {
  const uploads: Upload[] = [];
  let cuts = 0;
  const unwatch = (upload: Upload) => {
    if (upload.index < 0) return;
    const last = uploads.pop()!;
    if (last !== upload) {
      uploads[upload.index] = last;
      last.index = upload.index;
    }
    upload.index = -1;
  };
  const sweep = () => {
    const now = performance.now();
    // Backwards: a cut unwatches its upload, which moves the last one into its place, already visited.
    for (let i = uploads.length - 1; i >= 0; i--) {
      const upload = uploads[i];
      if (Number.isNaN(upload.seenAt)) upload.seenAt = now;
      else if (uploadOverdue(now - upload.seenAt, upload.received, pace)) {
        unwatch(upload);
        cuts++;
        upload.cut();
      }
    }
    onSweep();
  };
  const timer = setInterval(sweep, sweepIntervalMs(pace));
  timer.unref();
  return {
    watch(cut) {
      const upload: Upload = { seenAt: NaN, received: 0, cut, index: uploads.length };
      uploads.push(upload);
      return upload;
    },
    unwatch,
    active: () => uploads.length,
    cuts: () => cuts,
    close: () => clearInterval(timer),
  };
}
