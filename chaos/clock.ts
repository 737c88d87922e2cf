// The fake clock every process of the system under test runs on: libfaketime preloaded, reading
// a relative offset (`+0`, `+2d`) from one shared file. Monotonic clocks are left alone, so
// timers and timeouts keep real time while the wall clock jumps.
import { writeFileSync } from 'node:fs';
import { LIBFAKETIME } from '../scripts/provision.mts';

export const DAY_MS = 86_400_000;

/**
 * libfaketime reads the file again at most once a second (FAKETIME_CACHE_DURATION=1), so a
 * process follows a change within about that long; waiting this much longer covers a busy
 * machine before the clock is checked.
 */
export const CLOCK_FOLLOW_MS = 1_500;

export class FakeClock {
  private offset = 0;

  constructor(readonly file: string) {
    writeFileSync(file, '+0\n');
  }

  get offsetMs(): number {
    return this.offset;
  }

  /** The service's time now: the real clock plus the offset. */
  now(): number {
    return Date.now() + this.offset;
  }

  /** Moves every process's wall clock forward by whole days (written as `+Nd`, whole days only). */
  forward(days: number): void {
    this.offset += days * DAY_MS;
    writeFileSync(this.file, `+${this.offset / DAY_MS}d\n`);
  }

  /** Environment variables that put a process on this clock. */
  env(): Record<string, string> {
    return {
      LD_PRELOAD: LIBFAKETIME,
      FAKETIME_TIMESTAMP_FILE: this.file,
      FAKETIME_CACHE_DURATION: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    };
  }
}
