import { parseArgs } from 'node:util';

export class UsageError extends Error {}

/** Positional arguments and `--name value` options of one operator command. */
export function readArgs(argv: string[], options: Record<string, 'string'>, positional: string[]) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: Object.fromEntries(Object.entries(options).map(([k, type]) => [k, { type }])),
      allowPositionals: true,
      strict: true,
      tokens: true,
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const expected = positional.map((p) => `<${p}>`).join(' ');
  if (parsed.positionals.length > positional.length) {
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[positional.length])} (expected ${expected})`);
  }
  if (parsed.positionals.length < positional.length) throw new UsageError(`expected ${expected}`);
  // parseArgs keeps the last of a repeated option; two values for one setting is a mistake.
  const seen = new Set<string>();
  for (const token of parsed.tokens ?? []) {
    if (token.kind !== 'option') continue;
    if (seen.has(token.name)) throw new UsageError(`--${token.name} given twice`);
    seen.add(token.name);
  }
  const values = parsed.values as Record<string, string | undefined>;
  return { positionals: parsed.positionals, values };
}
