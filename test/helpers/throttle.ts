import type { TestFn } from 'ava';

/**
 * ava starts every test of a file at once. Files with many tests that each hold a database
 * connection would queue on the file's small pool past its acquire timeout on a loaded
 * 2-core machine, so at most `running` tests of the file run at a time.
 */
export function limitConcurrency(test: TestFn, running: number): void {
  let active = 0;
  const waiting: (() => void)[] = [];
  test.beforeEach(async () => {
    if (active < running) {
      active++;
      return;
    }
    await new Promise<void>((resolve) => waiting.push(resolve));
  });
  test.afterEach.always(() => {
    const next = waiting.shift();
    if (next) next();
    else active--;
  });
}
