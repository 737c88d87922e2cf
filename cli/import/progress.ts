// Progress of an import on stderr: a bar redrawn in place on a terminal, a plain line every
// few seconds otherwise (a log file or CI output would fill with carriage returns).

export interface ProgressState {
  done: number;
  total: number;
  /** Lines done when this run started (a resumed import): the rate counts this run only. */
  doneAtStart: number;
  elapsedMs: number;
}

/** `[#######-------------]  3,500/10,000  35%  812/s  ETA 8s` (pure). */
export function formatProgress(s: ProgressState, width = 24): string {
  const fraction = s.total === 0 ? 1 : Math.min(1, s.done / s.total);
  const filled = Math.round(fraction * width);
  const rate = s.elapsedMs > 0 ? ((s.done - s.doneAtStart) * 1000) / s.elapsedMs : 0;
  const eta = rate > 0 ? formatDuration(((s.total - s.done) / rate) * 1000) : '?';
  const n = (x: number) => x.toLocaleString('en-US');
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${n(s.done)}/${n(s.total)} ${Math.floor(fraction * 100)}% ${n(Math.round(rate))}/s ETA ${eta}`;
}

export function formatDuration(ms: number): string {
  const seconds = Math.ceil(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}

export interface ProgressOutput {
  isTTY?: boolean;
  write(text: string): unknown;
}

/** Redraws every 200 ms on a terminal, prints a line every `intervalMs` otherwise; `stop` prints the last state. */
export function startProgress(out: ProgressOutput, state: () => ProgressState, intervalMs: number) {
  const tty = out.isTTY === true;
  const draw = () => out.write(tty ? `\r${formatProgress(state())}\x1b[K` : `import: ${formatProgress(state())}\n`);
  const timer = setInterval(draw, tty ? 200 : intervalMs);
  return {
    stop() {
      clearInterval(timer);
      draw();
      if (tty) out.write('\n');
    },
  };
}
