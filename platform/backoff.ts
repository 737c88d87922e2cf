/** The wait before retry number `failures` (0: the first): `baseMs` doubled per failure, at most `capMs`. */
export function backoffMs(failures: number, baseMs: number, capMs: number): number {
  return Math.min(capMs, baseMs * 2 ** Math.max(0, failures));
}
