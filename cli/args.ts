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
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (parsed.positionals.length !== positional.length) {
    throw new UsageError(`expected ${positional.map((p) => `<${p}>`).join(' ')}`);
  }
  const values = parsed.values as Record<string, string | undefined>;
  return { positionals: parsed.positionals, values };
}
