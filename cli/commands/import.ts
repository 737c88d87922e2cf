// intake import <org-slug> --file customers.ndjson: a profile backfill through the public
// Identify API with @intake/client (retries, keep-alive), for the operator or any caller with a key.
import { gatewayUrl, type Config } from '../../platform/config.ts';
import { createDb } from '../../platform/db.ts';
import { createClient } from '../../clients/typescript/src/index.ts';
import { readArgs, UsageError } from '../args.ts';
import { COMMANDS } from '../usage.ts';
import { ImportStopped, runImport, type ImportSummary } from '../import/run.ts';
import { OperatorError, findLiveEnvironment } from '../../operations/operator.ts';

/** The contract's warning (Limits), quoted to whoever asks for a Track replay. */
export const TRACK_REPLAY_WARNING = 'Do not replay past events through Track: a replayed event whose name matches a published journey starts it.';
export const TRACK_REFUSED = `import sends Identify calls only and never replays events through Track: "${TRACK_REPLAY_WARNING}"`;

/** The contract's suggested concurrency for a profile backfill: 10 or fewer (the usage table's default). */
export const DEFAULT_CONCURRENCY = COMMANDS.import.options.concurrency.whole.default;

export async function importCommand(config: Config, argv: string[]): Promise<ImportSummary> {
  if (argv.some((a) => a === '--track' || a.startsWith('--track='))) throw new UsageError(TRACK_REFUSED, 'import');
  const {
    positionals: [orgSlug],
    values,
    numbers: { concurrency },
    usageError,
  } = readArgs(argv, 'import');
  const file = values.file!; // required by the table
  const apiKey = values.key ?? config.intakeApiKey;
  if (!apiKey) throw usageError('an API key is required: --key <key> or INTAKE_API_KEY');
  if (concurrency > DEFAULT_CONCURRENCY) console.error(`warning: the API contract suggests ${DEFAULT_CONCURRENCY} or fewer concurrent requests for a backfill`);
  if (values['env-key'] !== undefined && values.env === undefined) throw usageError('--env-key goes with --env <path-value>');

  let retries = 0;
  const client = createClient({
    baseUrl: values.url ?? gatewayUrl(config),
    orgSlug: values.env ?? orgSlug,
    apiKey,
    environment: values.env === undefined ? undefined : (values['env-key'] ?? (await environmentKey(config, orgSlug, values.env))),
    maxSockets: concurrency,
    onRetry: () => retries++,
  });
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once('SIGINT', stop).once('SIGTERM', stop);
  try {
    return await runImport({ file, client, concurrency, progress: process.stderr, signal: abort.signal, retries: () => retries });
  } catch (err) {
    if (err instanceof ImportStopped) throw new OperatorError(err.message);
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new OperatorError(`cannot read ${file}: no such file`);
    throw err;
  } finally {
    process.off('SIGINT', stop).off('SIGTERM', stop);
    client.close();
  }
}

/** X-Service-Environment of a non-production environment, read from the database when --env-key is not given. */
async function environmentKey(config: Config, orgSlug: string, pathValue: string): Promise<string> {
  const db = createDb(config);
  try {
    const { env } = await findLiveEnvironment(db, orgSlug, pathValue);
    return env.environmentKey;
  } finally {
    await db.$disconnect();
  }
}
