import { readArgs } from './args.ts';
import type { CommandName } from './usage.ts';
import { findEnvironment, type OperatorDeps } from '../operations/operator.ts';

/** A command on `<org-slug> …`: its arguments and the environment its org slug and `--env` name (`find`: which may be named). */
export async function environmentCommand(deps: Pick<OperatorDeps, 'db'>, argv: string[], command: CommandName, find = findEnvironment) {
  const args = readArgs(argv, command);
  const { env } = await find(deps.db, args.positionals[0], args.values.env);
  return { ...args, env };
}
