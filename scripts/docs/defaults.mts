// A setting's default quoted in the docs, as "`NAME` (default 1 MiB)" or "`NAME`, default 1 MiB":
// `npm run docs:check` compares each such mention with platform/config.ts, so a document (the API
// reference above all) cannot state a limit the configuration no longer has.
import { describeConfig } from '../../platform/config.ts';

const UNITS: [number, string][] = [
  [1_073_741_824, 'GiB'],
  [1_048_576, 'MiB'],
  [1024, 'KiB'],
];

/** A default as the docs write it: a whole number of GiB, MiB or KiB when it is one (from 64 KiB up), else as is. */
export function humanDefault(raw: string): string {
  if (!/^\d+$/.test(raw)) return raw;
  const n = Number(raw);
  for (const [size, unit] of UNITS) if (n >= 65_536 && n % size === 0) return `${n / size} ${unit}`;
  return raw;
}

const MENTION = /`([A-Z][A-Z0-9_]+)`(?:\s+\(|,\s+)default\s+([0-9][0-9.,]*(?: (?:GiB|MiB|KiB|bytes|ms))?)/g;

/** Every "`NAME` (default X)" of `text` whose X is not NAME's default, with its line. */
export function wrongDefaults(text: string): { line: number; name: string; stated: string; actual: string }[] {
  const defaults = new Map(describeConfig().map((s) => [s.env, s.default]));
  const found: { line: number; name: string; stated: string; actual: string }[] = [];
  for (const m of text.matchAll(MENTION)) {
    const actual = defaults.get(m[1]);
    if (actual === undefined) continue;
    const stated = m[2].replace(/,$/, '');
    if (stated === actual || stated === humanDefault(actual) || stated.replaceAll(',', '') === actual) continue;
    found.push({ line: text.slice(0, m.index).split('\n').length, name: m[1], stated, actual: humanDefault(actual) });
  }
  return found;
}

/** Whether `text` states NAME's default in the checked form. */
export function statesDefault(text: string, name: string): boolean {
  return [...text.matchAll(MENTION)].some((m) => m[1] === name);
}
