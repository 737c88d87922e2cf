// intake config [--get NAME]: the settings this checkout runs with, as every intake process of it
// reads them (the environment, then .env, then the defaults), so a second shell can check it
// talks to the same database and gateway as the first.
import { describeConfig, gatewayUrl, SECRET_SETTINGS, type Config } from '../../platform/config.ts';
import { readArgs } from '../args.ts';

/** A URL's password replaced by `***` (the rest is what an operator needs to see). */
function maskUrl(value: string): string {
  try {
    const url = new URL(value);
    if (!url.password) return value;
    url.password = '***';
    return url.toString();
  } catch {
    return value;
  }
}

/** Every setting's effective text: the environment's value, else the default; INTAKE_URL resolved. */
function effective(config: Config, env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { env: name, default: fallback } of describeConfig()) out[name] = env[name] ?? fallback;
  out.INTAKE_URL = gatewayUrl(config);
  return out;
}

/** The JSON document (secrets masked), or with --get one value as plain text. */
export function configCommand(config: Config, argv: string[], env: NodeJS.ProcessEnv = process.env): { json: Record<string, string> } | { text: string } {
  const { values, usageError } = readArgs(argv, 'config');
  const settings = effective(config, env);
  if (values.get !== undefined) {
    if (!Object.hasOwn(settings, values.get)) throw usageError(`unknown setting ${JSON.stringify(values.get)} (intake config lists them)`);
    return { text: settings[values.get] };
  }
  const json: Record<string, string> = {};
  for (const [name, value] of Object.entries(settings)) json[name] = SECRET_SETTINGS.has(name) ? (value ? '***' : '') : maskUrl(value);
  return { json };
}
